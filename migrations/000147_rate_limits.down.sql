DROP TRIGGER IF EXISTS usage_records_rate_settled ON usage_records;
DROP FUNCTION IF EXISTS tollgate_rate_settled();
DROP TABLE IF EXISTS rate_corrections;
DROP TABLE IF EXISTS rate_charges;
DROP TABLE IF EXISTS rate_windows;
DROP TABLE IF EXISTS rate_limits;
