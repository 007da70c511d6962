-- 1.3 M rows (about 150 MB): several times the 16 MB of shared_buffers, so a scan reads through the I/O path
CREATE TABLE t AS SELECT g AS id, md5(g::text) AS a, md5((g * 7)::text) AS b FROM generate_series(1, 1300000) g;
