-- a point read and a small range read on pgbench_accounts
\set aid random(1, 100000)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
SELECT count(*) FROM pgbench_accounts WHERE aid BETWEEN :aid AND :aid + 100;
