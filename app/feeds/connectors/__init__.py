"""Connectors by source kind: each fetches one source and says what it found (see base.Connector)."""

from __future__ import annotations

from app.feeds.connectors.base import Connector
from app.feeds.connectors.board import BoardConnector
from app.feeds.connectors.forum import ForumConnector
from app.feeds.connectors.rss import RssConnector

CONNECTORS: dict[str, Connector] = {
    "rss": RssConnector(),
    "board_feed": BoardConnector("board_feed"),
    "board_comment": BoardConnector("board_comment"),
    "forum_community": ForumConnector(),
}
