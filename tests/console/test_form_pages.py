"""The console's Forms in-process: a form made through the same service as `tidings forms create` (its
refusals shown), listed with its lists, its public URL and an embed snippet whose post the hosted form
takes."""

from __future__ import annotations

from html import unescape

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.mail import list_service
from app.models import Form
from tests.authroutes.conftest import ORIGIN, Person


def test_create_a_form_and_see_its_url_and_snippet(console: TestClient, db: Session, person: Person) -> None:
    assert "You have no forms." in console.get("/console/forms").text
    news = list_service.add_list(db, person.account_id, person.user_id, "News <weekly>").id
    no_list = console.post("/console/forms", data={"title": "Join us"})
    assert no_list.status_code == 400 and "A form subscribes to at least one list." in no_list.text
    assert 'value="Join us"' in no_list.text
    made = console.post("/console/forms", data={"title": 'Join "us"', "lists": [str(news)]})
    assert made.status_code == 303, made.text
    form = db.scalars(select(Form).where(Form.account_id == person.account_id)).one()

    page = console.get("/console/forms").text
    url = f"{ORIGIN}/f/{form.id}"
    assert f'<a href="{url}">{url}</a>' in page
    assert "Subscribes to News &lt;weekly&gt;" in page
    # The snippet is shown as text: its html, escaped for the page, with the title escaped inside it.
    snippet = unescape(page.split(f'id="snippet-{form.id}">', 1)[1].split("</pre>", 1)[0])
    assert snippet.startswith(f'<form method="post" action="{url}" aria-label="Join &quot;us&quot;">')
    assert 'name="email"' in snippet and 'name="website"' in snippet

    # What the snippet posts, the hosted form takes (a filled honeypot answers as usual, sends nothing).
    hosted = console.post(f"/f/{form.id}", data={"email": "x@example.com", "website": "spam"})
    assert hosted.status_code == 200, hosted.text
