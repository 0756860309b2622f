-- A webhook's secret is a credential minted by whoever created it. When an API token created it,
-- the webhook answers only while that token is live (neither revoked nor expired), so a
-- credential never outlives the token that minted it. NULL: created with the store's own URL
-- (whoever holds that holds the database itself), owned by no token.
ALTER TABLE webhooks ADD COLUMN owner_token_id text;

-- Webhooks created over HTTP before this column existed name their token in created_by
-- (`token:NAME(tok_…)`): they get it as their owner, so those of a revoked token stop answering too.
UPDATE webhooks SET owner_token_id = substring(created_by FROM '\((tok_[0-9a-f]+)\)$')
 WHERE created_by LIKE 'token:%' AND substring(created_by FROM '\((tok_[0-9a-f]+)\)$') IS NOT NULL;
