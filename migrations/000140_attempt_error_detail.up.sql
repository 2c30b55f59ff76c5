-- What a failed attempt's provider said beyond its code, for the
-- OpenAI-compatible endpoint to answer as OpenAI would: the request field
-- a rejection named (provider.Error.Param: a path of OpenAI request field
-- names, never the provider's text), and when the provider said a retry
-- may pass (its Retry-After, which the key's pause caps and a client is
-- still told).
ALTER TABLE task_attempts
    ADD COLUMN error_param text,
    ADD COLUMN error_retry_at timestamptz;
