"""Envoy's ext_proc messages as the endpoint picker reads and writes them (the Gateway API
Inference Extension's endpoint-picker protocol).

The pick goes back twice, as the protocol asks: the `x-gateway-destination-endpoint`
request header and the same value under `envoy.lb` in the dynamic metadata — the picked
endpoint, then fallbacks a retry takes (`IP:PORT,IP:PORT`; Envoy's `override_host`
policy walks them). Refusals are
immediate responses with the gateway's own JSON error bodies.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.type.v3 import http_status_pb2
from google.protobuf import struct_pb2

from flowserve.host.intake.openai_api import APIError

DESTINATION = "x-gateway-destination-endpoint"
SERVED = "x-gateway-destination-endpoint-served"
LB_NAMESPACE = "envoy.lb"
CHUNK = 64 << 10  # a streamed body goes back in pieces of at most this (Envoy's advice for full duplex)

BodyMode = processing_mode_pb2.ProcessingMode.BodySendMode
NONE, STREAMED, BUFFERED, FULL_DUPLEX = BodyMode.NONE, BodyMode.STREAMED, BodyMode.BUFFERED, \
    BodyMode.FULL_DUPLEX_STREAMED
_OVERWRITE = base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD
ProcessingRequest = pb.ProcessingRequest
ProcessingResponse = pb.ProcessingResponse


def headers_of(msg: pb.HttpHeaders) -> dict[str, str]:
    """Lower-cased header names to values (Envoy sends `raw_value` bytes; repeated names
    keep their first value; `repeated` names those the picker refuses when sent twice)."""
    out: dict[str, str] = {}
    for h in msg.headers.headers:
        if h.key not in out:
            out[h.key] = h.raw_value.decode("latin-1") if h.raw_value else h.value
    return out


def repeated(msg: pb.HttpHeaders, single: frozenset[bytes]) -> str | None:
    """The first header of `single` sent more than once (the gateway's rule: a proxy that
    checked the first and a server reading another would disagree)."""
    seen: set[str] = set()
    for h in msg.headers.headers:
        if h.key.encode("latin-1") in single:
            if h.key in seen:
                return h.key
            seen.add(h.key)
    return None


def _set(name: str, value: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(header=base_pb2.HeaderValue(key=name, raw_value=value.encode("latin-1")),
                                      append_action=_OVERWRITE)


def header_mutation(headers: Sequence[tuple[str, str]]) -> pb.HeaderMutation:
    return pb.HeaderMutation(set_headers=[_set(k, v) for k, v in headers])


def destination_metadata(endpoint: str) -> struct_pb2.Struct:
    md = struct_pb2.Struct()
    md.get_or_create_struct(LB_NAMESPACE)[DESTINATION] = endpoint
    return md


def served_endpoint(msg: pb.ProcessingRequest) -> str | None:
    """The endpoint that served the request, where the proxy reports it
    (`envoy.lb/x-gateway-destination-endpoint-served` in the metadata context)."""
    fields = msg.metadata_context.filter_metadata
    if LB_NAMESPACE not in fields:
        return None
    value = fields[LB_NAMESPACE].fields.get(SERVED)
    if value is None or not value.string_value:
        return None
    return value.string_value


def continue_headers(request: bool, headers: Sequence[tuple[str, str]] = ()) -> pb.ProcessingResponse:
    if not headers:
        return _CONTINUE[request, "headers"]
    hr = pb.HeadersResponse(response=pb.CommonResponse(header_mutation=header_mutation(headers)))
    return pb.ProcessingResponse(request_headers=hr) if request else pb.ProcessingResponse(response_headers=hr)


def continue_body(request: bool) -> pb.ProcessingResponse:
    return _CONTINUE[request, "body"]


def continue_trailers(request: bool) -> pb.ProcessingResponse:
    return _CONTINUE[request, "trailers"]


# the answers that change nothing, built once (gRPC only reads them)
_CONTINUE = {
    (request, part): pb.ProcessingResponse(**{f"{'request' if request else 'response'}_{part}": message})
    for request in (True, False)
    for part, message in (("headers", pb.HeadersResponse(response=pb.CommonResponse())),
                          ("body", pb.BodyResponse(response=pb.CommonResponse())),
                          ("trailers", pb.TrailersResponse()))
}


def streamed_body(request: bool, body: bytes, end: bool) -> Iterator[pb.ProcessingResponse]:
    """A body handed back in full-duplex mode (Envoy forwards only what the processor returns)."""
    pieces = [body[i:i + CHUNK] for i in range(0, len(body), CHUNK)] or [b""]
    for i, piece in enumerate(pieces):
        mutation = pb.BodyMutation(streamed_response=pb.StreamedBodyResponse(
            body=piece, end_of_stream=end and i == len(pieces) - 1))
        br = pb.BodyResponse(response=pb.CommonResponse(body_mutation=mutation))
        yield pb.ProcessingResponse(request_body=br) if request else pb.ProcessingResponse(response_body=br)


def routed_headers(endpoint: str, extra: Sequence[tuple[str, str]]) -> pb.ProcessingResponse:
    """Full-duplex mode: the pick in the answer to the request headers."""
    return pb.ProcessingResponse(
        request_headers=pb.HeadersResponse(response=pb.CommonResponse(
            header_mutation=header_mutation([(DESTINATION, endpoint), *extra]), clear_route_cache=True)),
        dynamic_metadata=destination_metadata(endpoint))


def routed_body(endpoint: str, extra: Sequence[tuple[str, str]]) -> pb.ProcessingResponse:
    """Buffered mode: the pick in the answer to the whole body (its headers wait for it)."""
    return pb.ProcessingResponse(
        request_body=pb.BodyResponse(response=pb.CommonResponse(
            header_mutation=header_mutation([(DESTINATION, endpoint), *extra]), clear_route_cache=True)),
        dynamic_metadata=destination_metadata(endpoint))


def immediate(err: APIError) -> pb.ProcessingResponse:
    """The gateway's JSON error, answered by the proxy without reaching an engine."""
    return json_response(err.status, err.encoded(), [(k.lower(), str(v)) for k, v in err.headers.items()])


def json_response(status: int, body: bytes, headers: Sequence[tuple[str, str]] = ()) -> pb.ProcessingResponse:
    return pb.ProcessingResponse(immediate_response=pb.ImmediateResponse(
        status=http_status_pb2.HttpStatus(code=status), body=body,
        headers=header_mutation([("content-type", "application/json"), *headers]),
        details="flowserve_epp"))
