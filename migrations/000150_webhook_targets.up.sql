-- Webhook targets (webhooks.AddressPolicy). allow_private records that an
-- admin key set the URL, so deliveries may dial private addresses;
-- accepted_at is when the URL first answered a delivery with a 2xx, after
-- which the deliveries list shows a failed attempt's status code (before,
-- only "unreachable": the list is no port scanner). A changed URL has
-- accepted nothing.
ALTER TABLE webhook_endpoints
    ADD COLUMN allow_private boolean NOT NULL DEFAULT false,
    ADD COLUMN accepted_at   timestamptz;

-- Attempts recorded before speak the one class an owner may see: no URL
-- has accepted a delivery yet by this column's count.
UPDATE webhook_events SET last_error = 'unreachable', last_status = NULL WHERE last_error IS NOT NULL;
