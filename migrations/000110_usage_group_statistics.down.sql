DROP STATISTICS IF EXISTS usage_records_groups;
