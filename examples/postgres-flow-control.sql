-- Resource pools, priorities and exception rules for
-- examples/postgres-flow-control.yaml, in GaussDB's syntax. Run once on
-- the admin console; the catalog file keeps them:
--
--   psql -h 127.0.0.1 -p 6433 -U admin -f examples/postgres-flow-control.sql

-- A statement moving more than 100 MB/s for over 10 s is demoted to the
-- low class (action penalty) until it ends.
CREATE EXCEPT RULE bulk_transfer WITH (bandwidth=100, elapsedtime=10, action='penalty');

-- Interactive traffic: high priority, the largest share of the link.
CREATE RESOURCE POOL oltp WITH (network_priority='high', weight=8);
-- Reports and exports: normal priority, demoted by the rule above.
CREATE RESOURCE POOL reporting WITH (network_priority='normal', weight=2, except_rule='bulk_transfer');
-- Backups and batch loads: always low, limited by low_priority_bandwidth.
CREATE RESOURCE POOL batch WITH (network_priority='low', weight=1);

-- Database users and their pools (the database's own users; sluice only
-- binds the names to pools).
CREATE USER app RESOURCE POOL 'oltp';
CREATE USER reports RESOURCE POOL 'reporting';
CREATE USER backup RESOURCE POOL 'batch';
