-- A task's answer beyond its first choice's text (tool calls, refusal,
-- every choice when several were asked, logprobs) as JSON, sealed with the
-- task's data key and bound to the task id, like output_sealed; NULL when
-- the answer is its text alone. Never indexed: a task's finish stays a HOT
-- update (000114).
ALTER TABLE tasks ADD COLUMN answer_sealed bytea;
COMMENT ON COLUMN tasks.answer_sealed IS
    'The answer''s tool calls, refusal, choices and logprobs, sealed; NULL for a text-only answer';
