DROP TRIGGER IF EXISTS budget_reservations_rate_released ON budget_reservations;
DROP FUNCTION IF EXISTS tollgate_rate_released();
