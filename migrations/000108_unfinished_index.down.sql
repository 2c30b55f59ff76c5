DROP INDEX tasks_unfinished;
