DROP INDEX CONCURRENTLY IF EXISTS public.tasks_failed_requests;
