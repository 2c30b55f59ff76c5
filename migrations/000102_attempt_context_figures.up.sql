-- The figures of a context-length refusal (provider.Error.ContextWindow,
-- ContextTokens), read as integers from the provider's message, so that
-- a surface can answer it in the wording its clients detect without
-- passing the provider's text on. NULL when the refusal gave none.
ALTER TABLE task_attempts
    ADD COLUMN context_window integer,
    ADD COLUMN context_tokens integer;
