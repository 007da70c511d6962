-- distinct (customer, day) pairs: a hash of a million groups, spilled in batches at 4MB, one big table at 64MB
SELECT count(*) FROM (SELECT DISTINCT customer, day FROM orders) d
