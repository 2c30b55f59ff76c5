-- Support searches by status. Failed and canceled tasks are a small share
-- of all, so a partial index each costs little and lets a status search
-- stop after one page instead of scanning the window. (Queued and running
-- tasks are served by tasks_unfinished; succeeded is most of the table.)
CREATE INDEX tasks_failed_created ON tasks (created_at DESC, id DESC) WHERE status = 'failed';
CREATE INDEX tasks_canceled_created ON tasks (created_at DESC, id DESC) WHERE status = 'canceled';
