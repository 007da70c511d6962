-- the first quarter's orders ranked by amount: a sort of 250 000 rows (on disk at 4MB, in memory at 64MB)
SELECT count(*) FILTER (WHERE r <= 1000) FROM (
  SELECT rank() OVER (ORDER BY amount DESC, id) AS r FROM orders WHERE day < date '2025-04-01'
) ranked
