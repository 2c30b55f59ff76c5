-- The request field a provider's rejection named (provider.Error.Param: a
-- path of OpenAI request field names, never the provider's text), so that
-- the OpenAI-compatible endpoint can name it in error.param.
ALTER TABLE task_attempts ADD COLUMN error_param text;
