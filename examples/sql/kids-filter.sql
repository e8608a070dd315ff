/* Movies suitable for kids, judged per review by the LLM (the paper's filter query, Q2),
   on the reviews with id < 20000 (about 300).
     flowserve sql "$(cat examples/sql/kids-filter.sql)" --table movies=flowserve/data/llmsql/movies_small.csv */
SELECT movie_title
FROM movies
WHERE id < 20000 AND review_content IS NOT NULL
  AND LLM_FILTER('Would this movie suit kids? {movie information} {user review}', movie_info, review_content)
