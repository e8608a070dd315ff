/* A score from 1 to 5 per review, averaged per movie (LLM_NUMBER parses the answer as a number).
     flowserve sql "$(cat examples/sql/average-score.sql)" --table movies=flowserve/data/llmsql/movies_small.csv */
SELECT movie_title,
       avg(LLM_NUMBER('Score this review from 1 to 5: {review}', review_content)) AS score
FROM movies
WHERE id < 20000 AND review_content IS NOT NULL
GROUP BY movie_title
ORDER BY score DESC
