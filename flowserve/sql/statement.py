"""A statement's LLM calls and the queries that feed them (sqlglot, DuckDB dialect).

Every `LLM*()` call is rewritten into an internal UDF over (operator id, list of the
argument values) whose template and output spec are parsed once here. For the top-level
SELECT, each operator gets a *prefetch* query — the argument rows that reach it — so the
planner sees the whole column before a single call is made. With predicate ordering the
WHERE's cheap conjuncts run before the LLM ones (and earlier LLM conjuncts before later
ones), and LLM projections run on the rows that pass every filter, after LIMIT when the
LIMIT applies to rows; without it every LLM filter sees every row of the FROM clause.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp

from flowserve.sql.errors import SQLInputError
from flowserve.sql.output import OutputSpec, choice_spec, json_spec
from flowserve.sql.planner import LLMOp
from flowserve.sql.templates import parse_template

FUNCS = {"LLM": "text", "LLM_FILTER": "bool", "LLM_NUMBER": "number", "LLM_CHOICE": "choice", "LLM_JSON": "json"}
UDF = {"text": "__fs_llm_text", "bool": "__fs_llm_bool", "number": "__fs_llm_number",
       "choice": "__fs_llm_text", "json": "__fs_llm_text"}
ERROR_UDF = "__fs_llm_error"
DEFAULT_MAX_TOKENS = {"text": 64, "bool": 4, "number": 8, "choice": 8, "json": 96}
CLAUSE_RANK = {"where": 0, "select": 1, "other": 2}  # where an operator used twice is prefetched


@dataclass
class Prefetch:
    op_id: int
    sql: str  # SELECT <argument list> FROM ... WHERE ...
    clause: str  # "where" | "select"


@dataclass
class Statement:
    sql: str  # the rewritten statement (internal UDFs)
    ops: dict[int, LLMOp] = field(default_factory=dict)
    prefetch: list[Prefetch] = field(default_factory=list)
    error_column: bool = False
    kind: str = "select"  # the statement's kind (select, union, copy, ...): explain runs queries only

    @property
    def is_query(self) -> bool:
        return self.kind in ("select", "union", "intersect", "except", "subquery")


def _literal(node: exp.Expression, what: str, fn: str) -> str:
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise SQLInputError(f"{fn}(): the {what} must be a string literal, got {node.sql()[:60]!r}")
    return node.this


def _op(call: exp.Anonymous, max_tokens: int | None, model: str | None) -> tuple[LLMOp, list[exp.Expression]]:
    fn = call.name.upper()
    kind = FUNCS[fn]
    args = list(call.expressions)
    spec = OutputSpec(kind)  # type: ignore[arg-type]
    if kind in ("choice", "json"):
        if not args:
            raise SQLInputError(f"{fn}(): missing the {'allowed answers' if kind == 'choice' else 'JSON schema'}")
        first = _literal(args.pop(0), "allowed answers" if kind == "choice" else "JSON schema", fn)
        spec = choice_spec(first) if kind == "choice" else json_spec(first)
    if not args:
        raise SQLInputError(f"{fn}(): missing the prompt template")
    template = parse_template(_literal(args.pop(0), "instruction", fn), len(args), [_arg_name(a) for a in args])
    mt = max_tokens or DEFAULT_MAX_TOKENS[kind]
    return LLMOp(fn, template, spec, mt, model), args


def _arg_name(arg: exp.Expression) -> str:
    """A field's name in the paper's call form: the column's name, else the expression."""
    return arg.name if isinstance(arg, exp.Column) else arg.sql(dialect="duckdb")[:60]


def _arg_list(args: list[exp.Expression]) -> exp.Expression:
    return exp.Anonymous(this="list_value", expressions=[exp.Cast(this=a.copy(), to=exp.DataType.build("VARCHAR"))
                                                         for a in args])


def _top_select(node: exp.Expression, top: exp.Select) -> bool:
    return node.find_ancestor(exp.Select) is top


def analyse(sql: str, max_tokens: int | None = None, model: str | None = None, predicates: bool = True,
            error_column: bool = True) -> Statement:
    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.SqlglotError as e:
        raise SQLInputError(f"SQL syntax error: {(str(e).splitlines() or ['?'])[0][:300]}") from None
    except RecursionError:
        raise SQLInputError("SQL syntax error: the statement nests too deeply") from None
    if tree is None:
        raise SQLInputError("the statement is empty")
    calls = [c for c in tree.find_all(exp.Anonymous) if c.name.upper() in FUNCS]
    if not calls:
        return Statement(sql, kind=tree.key)
    top = tree if isinstance(tree, exp.Select) else None
    if top is not None:
        _name_llm_columns(top)
    calls.sort(key=lambda c: -c.depth)  # inner calls first: nested LLM arguments resolve first
    ops: dict[int, LLMOp] = {}
    ids: dict[str, int] = {}  # one operator per distinct call: `GROUP BY LLM(...)` is its SELECT's expression
    located: dict[int, tuple[exp.Expression, str]] = {}  # op id → (a rewritten call, its clause)
    err_calls: dict[int, exp.Expression] = {}
    for call in calls:
        op, args = _op(call, max_tokens, model)
        i = ids.setdefault(call.sql(dialect="duckdb"), len(ids))
        ops[i] = op
        udf = exp.Anonymous(this=UDF[op.output.kind], expressions=[exp.Literal.number(i), _arg_list(args)])
        clause = "other"
        if top is not None and _top_select(call, top):
            clause = "where" if call.find_ancestor(exp.Where) is not None else "select"
            if clause == "select" and call.find_ancestor(exp.Order, exp.Having, exp.Group) is not None:
                clause = "other"
        if clause == "select" and call.find_ancestor(exp.Select) is top and \
                any(call is e or call in e.find_all(exp.Anonymous) for e in top.expressions):
            err_calls[i] = exp.Anonymous(this=ERROR_UDF, expressions=[exp.Literal.number(i), _arg_list(args)])
        call.replace(udf)
        if i not in located or CLAUSE_RANK[clause] < CLAUSE_RANK[located[i][1]]:  # prefetched where it can be
            located[i] = (udf, clause)
    st = Statement(tree.sql(dialect="duckdb"), ops, kind=tree.key)
    if top is None:
        return st
    prefetch = _prefetch(top, [(i, udf, clause) for i, (udf, clause) in located.items()], predicates)
    aggregated = top.args.get("group") is not None or top.args.get("distinct") is not None or \
        any(e.find(exp.AggFunc) is not None for e in top.expressions)
    if error_column and err_calls and not aggregated:
        joined = exp.Anonymous(this="concat_ws", expressions=[exp.Literal.string("; "), *err_calls.values()])
        col = exp.alias_(exp.Nullif(this=joined, expression=exp.Literal.string("")), "llm_error")
        top.set("expressions", [*top.expressions, col])
        return replace(st, sql=tree.sql(dialect="duckdb"), prefetch=prefetch, error_column=True)
    return replace(st, prefetch=prefetch)


def _name_llm_columns(top: exp.Select) -> None:
    """A result column with an LLM call and no alias is named after the expression the
    user wrote, not the internal function it is rewritten into."""
    top.set("expressions", [
        exp.alias_(e, e.sql(dialect="duckdb"), quoted=True, copy=False)
        if not isinstance(e, exp.Alias) and any(c.name.upper() in FUNCS for c in e.find_all(exp.Anonymous)) else e
        for e in top.expressions])


def _prefetch(top: exp.Select, located: list[tuple[int, exp.Expression, str]], predicates: bool) -> list[Prefetch]:
    where = top.args.get("where")
    conjuncts = list(where.this.flatten()) if where is not None and isinstance(where.this, exp.And) else \
        ([where.this] if where is not None else [])
    is_llm = [any(n.name in UDF.values() for n in c.find_all(exp.Anonymous)) for c in conjuncts]
    cheap = [c for c, llm in zip(conjuncts, is_llm, strict=True) if not llm]
    llm_conj = [c for c, llm in zip(conjuncts, is_llm, strict=True) if llm]
    out: list[Prefetch] = []
    limit_ok = (top.args.get("group") is None and top.args.get("having") is None and top.args.get("distinct") is None
                and not any(e.find(exp.AggFunc, exp.Window) is not None for e in top.expressions))
    order = top.args.get("order")
    if order is not None and any(n.name in UDF.values() for n in order.find_all(exp.Anonymous)):
        limit_ok = False
    for op_id, udf, clause in located:
        if clause == "other":
            continue
        q = top.copy()
        for key in ("group", "having", "distinct", "order", "limit", "offset", "qualify", "windows"):
            q.set(key, None)
        q.set("expressions", [udf.expressions[1].copy()])
        conds: list[exp.Expression] = []
        if clause == "where":
            k = next(j for j, c in enumerate(llm_conj) if any(n is udf for n in c.find_all(exp.Anonymous)))
            conds = [*cheap, *llm_conj[:k]] if predicates else []
        else:
            conds = list(conjuncts)
            if predicates and limit_ok:
                if order is not None:
                    q.set("order", order.copy())
                for key in ("limit", "offset"):
                    if top.args.get(key) is not None:
                        q.set(key, top.args[key].copy())
        q.set("where", exp.Where(this=exp.and_(*[c.copy() for c in conds])) if conds else None)
        out.append(Prefetch(op_id, q.sql(dialect="duckdb"), "where" if clause == "where" else "select"))
    # where-clause operators run first (in conjunct order), then the projections
    out.sort(key=lambda p: p.clause != "where")
    return out
