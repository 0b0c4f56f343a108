-- Exception rules for examples/mysql-abort-rules.yaml, in GaussDB's
-- syntax. Run once on the admin console; the catalog file keeps them:
--
--   psql -h 127.0.0.1 -p 6433 -U admin -f examples/mysql-abort-rules.sql

-- A statement of an application user running longer than 30 s is killed
-- (KILL QUERY with the route's kill_user).
CREATE EXCEPT RULE long_query WITH (elapsedtime=30, action='abort');
-- A statement pulling more than 50 MB/s for over 5 s is killed too.
CREATE EXCEPT RULE runaway_scan WITH (bandwidth=50, elapsedtime=5, action='abort');

CREATE RESOURCE POOL app WITH (except_rule='long_query,runaway_scan');
-- Users without a binding are in the default pool, which has no rules.
CREATE USER shop RESOURCE POOL 'app';
