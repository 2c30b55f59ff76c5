DELETE FROM river_job WHERE kind = 'webhook_delivery';
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
