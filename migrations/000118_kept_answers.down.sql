DROP TABLE IF EXISTS task_kept_answers;
