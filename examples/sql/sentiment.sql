/* The sentiment of each review, one of three answers, counted per movie.
     flowserve sql "$(cat examples/sql/sentiment.sql)" --table movies=flowserve/data/llmsql/movies_small.csv */
SELECT movie_title,
       LLM_CHOICE('Positive|Negative|Neutral', 'The sentiment of this review: {review}', review_content) AS sentiment,
       count(*) AS reviews
FROM movies
WHERE id < 20000 AND review_content IS NOT NULL
GROUP BY ALL
ORDER BY reviews DESC
