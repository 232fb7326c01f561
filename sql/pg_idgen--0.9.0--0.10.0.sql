-- pg_idgen 0.9.0 -> 0.10.0. A copy of what the modules declare: the upgrade test compares an
-- updated database with a fresh install. Each change has a section of its own below.
\echo Use "ALTER EXTENSION pg_idgen UPDATE TO '0.10.0'" to load this file. \quit
