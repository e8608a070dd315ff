"""The paper's query types (Liu et al. §7.1.2), runnable by name on the movies table
(`movies_small.csv`, columns rotten_tomatoes_link, review_content, movie_title,
movie_info, id) and the products-like table (`generators.products`). Q5 (RAG) joins
questions to a documents table (no retrieval service in flowserve yet)."""

from __future__ import annotations

from flowserve.sql.errors import SQLInputError

MOVIES = {
    "Q1": "SELECT LLM('Recommend movies for the user based on {movie information} and {user review}', "
          "movie_info, review_content) AS recommendation FROM movies",
    "Q2": "SELECT movie_title FROM movies WHERE LLM_FILTER('Analyze whether this movie would be suitable for "
          "kids based on {movie information} and {user review}', movie_info, review_content) "
          "AND length(review_content) > 60",
    "Q3": "SELECT LLM('Recommend movies for the user based on {movie information} and {user review}', "
          "movie_info, review_content) AS recommendation FROM movies WHERE LLM_FILTER('Analyze whether this "
          "movie would be suitable for kids based on {movie information} and {user review}', movie_info, "
          "review_content) AND length(review_content) > 60",
    "Q4": "SELECT movie_title, AVG(LLM_NUMBER('Rate a satisfaction score between 0 (bad) and 5 (good) based on "
          "{review} and {info}', review_content, movie_info)) AS score FROM movies GROUP BY movie_title",
}
PRODUCTS = {
    "Q1": "SELECT LLM('Analyze whether the product quality inferred from the {review} matches the quality "
          "advertised in the {description}', reviewText, description) AS analysis FROM products",
    "Q2": "SELECT asin FROM products WHERE LLM_CHOICE('Positive|Negative|Neutral', 'What is the sentiment of "
          "this {review} of the product with {description}?', reviewText, description) = 'Negative' AND verified",
    "Q3": "SELECT LLM('Analyze whether the product quality inferred from the {review} matches the quality "
          "advertised in the {description}', reviewText, description) AS analysis FROM products WHERE "
          "LLM_CHOICE('Positive|Negative|Neutral', 'What is the sentiment of this {review} of the product with "
          "{description}?', reviewText, description) = 'Negative' AND verified",
    "Q4": "SELECT asin, AVG(LLM_NUMBER('Rate a satisfaction score between 0 (bad) and 5 (good) based on "
          "{review} and {description}', reviewText, description)) AS score FROM products GROUP BY asin",
}
RAG = {"Q5": "SELECT q.id, LLM('Given the following {context}, answer this {question}', d.context, q.question) "
             "AS answer FROM questions q JOIN documents d ON q.doc_id = d.doc_id WHERE NOT q.is_impossible"}
DATASETS = {"movies": MOVIES, "products": PRODUCTS, "squad": RAG}


def query(name: str, dataset: str = "movies") -> str:
    """`Q1`…`Q5` (Q5 runs on the `squad` tables: questions, documents)."""
    key = name.upper()
    if key == "Q5":
        dataset = "squad"
    table = DATASETS.get(dataset)
    if table is None or key not in table:
        raise SQLInputError(f"unknown query {name!r} for dataset {dataset!r}; known: "
                            f"{', '.join(sorted(set(MOVIES) | set(RAG)))} on {', '.join(DATASETS)}")
    return table[key]
