SELECT lo_custkey, sum(lo_revenue) AS revenue FROM lineorder GROUP BY lo_custkey ORDER BY revenue DESC LIMIT 10;
