-- January's sales per region: orders joined to 200 000 customers; which side is hashed depends on work_mem
SELECT c.region, count(*) AS orders, sum(o.amount) AS sales
FROM orders o JOIN customers c ON c.id = o.customer
WHERE o.day < date '2025-02-01'
GROUP BY c.region ORDER BY c.region
