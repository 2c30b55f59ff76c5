DROP FUNCTION IF EXISTS tollgate_abort(text, text);
