"""Events out: what happens in the email API (a contact subscribed, opened, bounced...; a campaign
finished) told to the account's webhooks, signed as Standard Webhooks specifies.

`emit.py` writes an event into the outbox (`webhook_events`) in the transaction of the change it tells,
so an event exists exactly when its change does; `queue.py` claims due events and records attempts;
`delivery.py` is the background job that signs and sends them; `campaign_finish.py` finds the campaigns
that finished sending. The routes are `app/mail/webhook_routes.py`, the rules `webhook_service.py`.
"""
