-- A million orders over 200 000 customers (about 70 MB): their sorts and hashes outgrow 4MB of work_mem.
SELECT setseed(0.42);  -- the same rows on every server
CREATE TABLE customers AS
SELECT c AS id, 'customer ' || c AS name, c % 50 AS region
FROM generate_series(1, 200000) c;
ALTER TABLE customers ADD PRIMARY KEY (id);
CREATE TABLE orders AS
SELECT g AS id,
       1 + floor(random() * 200000)::int AS customer,
       round((random() * 1000)::numeric, 2) AS amount,
       date '2025-01-01' + g % 365 AS day
FROM generate_series(1, 1000000) g;
