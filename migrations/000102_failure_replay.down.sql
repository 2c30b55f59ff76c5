DROP INDEX IF EXISTS public.tasks_failed_requests;
