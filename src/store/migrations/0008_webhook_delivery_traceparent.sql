-- The W3C traceparent a webhook's caller sent with a delivery (normalised; a malformed one is not
-- kept): the run the delivery starts joins that trace, as a run submitted with one does.
ALTER TABLE webhook_deliveries ADD COLUMN traceparent text;
