"""The paper's query types (Liu et al. §7.1.2), runnable by name on the movies table
(`movies_small.csv`, columns rotten_tomatoes_link, review_content, movie_title,
movie_info, id) and the products-like table (`generators.products`). Q5 (RAG) joins
questions to a documents table (no retrieval service in flowserve yet)."""

from __future__ import annotations

from pathlib import Path

from flowserve.sql.errors import SQLInputError

MOVIES_CSV = Path(__file__).resolve().parents[1] / "data" / "llmsql" / "movies_small.csv"  # shipped with the package

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

# The paper's query types on the real tables (`real_tables.py`), in the paper's call form
# (a plain instruction; the fields follow as `column: value` lines). Columns are written
# in a natural reading order (identifier first), as a user would: reordering has to earn
# its keep. Q1 projection, Q2 filter, Q3 filter + projection, Q4 aggregate of
# LLM_NUMBER, Q5 a join that brings a long shared context (RAG by join).
REAL: dict[str, dict[str, str]] = {
    "airports": {
        "Q1": "SELECT iata, LLM('Describe in one sentence the region this airport serves.', iata, name, city, "
              "state, country) AS region FROM airports",
        "Q2": "SELECT iata FROM airports WHERE LLM_FILTER('Does this airport have scheduled passenger flights?', "
              "iata, name, city, state) AND country = 'USA'",
        "Q3": "SELECT iata, LLM('Describe in one sentence the region this airport serves.', iata, name, city, state) "
              "AS region FROM airports WHERE LLM_FILTER('Is this a private or military airfield?', iata, name, city, "
              "state) AND country = 'USA'",
        "Q4": "SELECT state, AVG(LLM_NUMBER('Rate from 0 to 5 how remote this airport is.', iata, name, city, "
              "state)) AS remoteness FROM airports GROUP BY state",
        "Q5": "SELECT a.iata, LLM_FILTER('Given the airports of its state, is this one the main hub?', a.iata, "
              "a.name, s.airports) AS hub FROM airports a JOIN (SELECT state, string_agg(name, ', ') AS airports "
              "FROM airports GROUP BY state) s ON a.state = s.state",
    },
    "weather": {
        "Q1": "SELECT date, LLM('Write a one-line weather report for this day in Seattle.', date, precipitation, "
              "temp_max, temp_min, wind, weather) AS report FROM weather",
        "Q2": "SELECT date FROM weather WHERE LLM_FILTER('Was this a good day for a picnic?', date, temp_max, "
              "precipitation, weather) AND temp_max > 15",
        "Q3": "SELECT date, LLM('Write a one-line weather report for this day in Seattle.', date, temp_max, "
              "precipitation, weather) AS report FROM weather WHERE LLM_FILTER('Was this a good day for a picnic?', "
              "date, temp_max, precipitation, weather) AND temp_max > 15",
        "Q4": "SELECT weather, AVG(LLM_NUMBER('Rate the discomfort of this day from 0 to 5.', date, temp_max, "
              "temp_min, wind, weather)) AS discomfort FROM weather GROUP BY weather",
        "Q5": "SELECT w.date, LLM_FILTER('Given the month so far, was this day unusual?', w.date, w.weather, "
              "w.temp_max, m.observations) AS unusual FROM weather w JOIN (SELECT date_trunc('month', date) AS "
              "month, string_agg(weather || ' ' || temp_max, '; ') AS observations FROM weather GROUP BY 1) m "
              "ON date_trunc('month', w.date) = m.month",
    },
    "cars": {
        "Q1": "SELECT Name, LLM('Write a one-line advert for this car.', Name, Year, Origin, Cylinders, Horsepower) "
              "AS advert FROM cars",
        "Q2": "SELECT Name FROM cars WHERE LLM_FILTER('Is this a sports car?', Name, Horsepower, Acceleration, "
              "Origin) AND Cylinders >= 6",
        "Q3": "SELECT Name, LLM('Write a one-line advert for this car.', Name, Horsepower, Acceleration, Origin) "
              "AS advert FROM cars WHERE LLM_FILTER('Is this a sports car?', Name, Horsepower, Acceleration, Origin) "
              "AND Cylinders >= 6",
        "Q4": "SELECT Origin, AVG(LLM_NUMBER('Rate the fuel economy of this car from 0 to 5.', Name, "
              "Miles_per_Gallon, Cylinders, Origin)) AS economy FROM cars GROUP BY Origin",
        "Q5": "SELECT c.Name, LLM_FILTER('Given the other cars of its origin, is this one above average?', c.Name, "
              "c.Horsepower, o.models) AS above FROM cars c JOIN (SELECT Origin, string_agg(Name, ', ') AS models "
              "FROM cars GROUP BY Origin) o ON c.Origin = o.Origin",
    },
    "penguins": {
        "Q1": "SELECT \"Individual ID\", LLM('Summarise this penguin observation in one sentence.', \"Individual ID\", "
              "\"Sample Number\", studyName, Species, Region, Island, Stage, \"Clutch Completion\", \"Date Egg\", "
              "\"Culmen Length (mm)\", \"Culmen Depth (mm)\", \"Flipper Length (mm)\", \"Body Mass (g)\", Sex, "
              "Comments) AS summary FROM penguins",
        "Q2": "SELECT \"Individual ID\" FROM penguins WHERE LLM_FILTER('Is this penguin heavy for its species?', "
              "\"Individual ID\", \"Body Mass (g)\", Sex, Species, Island) AND \"Body Mass (g)\" <> 'NA'",
        "Q3": "SELECT \"Individual ID\", LLM('Summarise this penguin in one sentence.', \"Individual ID\", "
              "\"Body Mass (g)\", Sex, Species, Island) AS summary FROM penguins WHERE LLM_FILTER('Is this penguin "
              "heavy for its species?', \"Individual ID\", \"Body Mass (g)\", Sex, Species, Island) "
              "AND \"Body Mass (g)\" <> 'NA'",
        "Q4": "SELECT Species, AVG(LLM_NUMBER('Rate the health of this penguin from 0 to 5.', \"Individual ID\", "
              "\"Body Mass (g)\", \"Flipper Length (mm)\", Sex, Species, Island, Stage)) AS health FROM penguins "
              "GROUP BY Species",
        "Q5": "SELECT p.\"Individual ID\", LLM_FILTER('Given the masses of its species, is this penguin an "
              "outlier?', p.\"Individual ID\", p.\"Body Mass (g)\", s.masses) AS outlier FROM penguins p JOIN "
              "(SELECT Species, string_agg(\"Body Mass (g)\", ', ') AS masses FROM penguins GROUP BY Species) s "
              "ON p.Species = s.Species",
    },
    "subdivisions": {
        "Q1": "SELECT code, LLM('Describe this administrative subdivision in one sentence.', code, name, type) "
              "AS description FROM subdivisions",
        "Q2": "SELECT code FROM subdivisions WHERE LLM_FILTER('Does this subdivision have a sea coast?', code, "
              "name, type) AND type <> 'Country'",
        "Q3": "SELECT code, LLM('Describe this administrative subdivision in one sentence.', code, name, type) AS "
              "description FROM subdivisions WHERE LLM_FILTER('Does this subdivision have a sea coast?', code, "
              "name, type) AND type <> 'Country'",
        "Q4": "SELECT type, AVG(LLM_NUMBER('Rate from 0 to 5 how populous this subdivision is.', code, name, "
              "type)) AS populous FROM subdivisions GROUP BY type",
        "Q5": "SELECT s.code, LLM_FILTER('Is this subdivision home to the capital of its country?', s.code, s.name, "
              "s.type, c.official_name) AS capital FROM subdivisions s JOIN countries c "
              "ON split_part(s.code, '-', 1) = c.alpha_2 WHERE c.official_name IS NOT NULL",
    },
    "languages": {
        "Q1": "SELECT alpha_3, LLM('Where is this language spoken? Answer in one sentence.', alpha_3, name, scope, "
              "type) AS region FROM languages",
        "Q2": "SELECT alpha_3 FROM languages WHERE LLM_FILTER('Is this language spoken in Africa?', alpha_3, name, "
              "scope, type) AND type <> 'E'",
        "Q3": "SELECT alpha_3, LLM('Where is this language spoken? Answer in one sentence.', alpha_3, name, scope, "
              "type) AS region FROM languages WHERE LLM_FILTER('Is this language spoken in Africa?', alpha_3, name, "
              "scope, type) AND type <> 'E'",
        "Q4": "SELECT type, AVG(LLM_NUMBER('Rate from 0 to 5 how many people speak this language.', alpha_3, name, "
              "scope, type)) AS speakers FROM languages GROUP BY type",
        "Q5": "SELECT l.alpha_3, LLM('Given the list of macrolanguages, which one does this language belong to?', "
              "l.alpha_3, l.name, m.macrolanguages) AS macro FROM languages l, (SELECT string_agg(name, ', ') AS "
              "macrolanguages FROM languages WHERE scope = 'M') m WHERE l.type = 'L' AND l.scope = 'I'",
    },
}
