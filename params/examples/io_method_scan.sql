SELECT count(*), max(a) FROM t;
