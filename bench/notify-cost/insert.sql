-- One API-like write: a single-row INSERT INTO messages in its own transaction (pgbench -M prepared).
\set author random(1, :users)
INSERT INTO messages (content, subject, author_id) VALUES ('pgbench notify cost ' || :author, 'Benchmark', :author);
