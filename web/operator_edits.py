"""The operator's page's changes to the guide: documents uploaded, replaced, deleted and restored, an answer written
for an unanswered question, a question tried as a visitor would ask it, and who did what.

The routes, for operators only (`web.operator_check`); a change a cookie authenticates carries the page's
anti-forgery token (form field `csrf`, or header `X-CSRF-Token`); a bearer token needs none:

- `GET /operator/documents.json`: each document as the guide reads it (title, passages, or why it cannot be read),
  the replies and the questions that drew on it in the period, the period's use, and the kept documents;
- `POST /operator/documents`: multipart, field `file` (several allowed); `replace=1` puts a file in the place of the
  one of its name;
- `DELETE /operator/documents/{name}` (the page, which runs no scripts: `POST` with `action=delete`);
- `POST /operator/restore/{kept}`: a deleted or replaced document back;
- `POST /operator/answers`: JSON or form, `question`, `answer`, optional `title` and `names` (one per line; by
  default the wordings of the question's group): a Markdown entry in the operators' folder;
- `GET /operator/try?question=`: the passages and what the model reads; `POST` (form `question`) adds the reply;
- `GET /operator/activity.csv|json`: who changed what.

A change is indexed before the answer (a visitor's next question finds it), recorded in the activity list, and
answered to a script as JSON, to the page by going back to it (or, where nothing was saved, a page saying why).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import date, timedelta

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from insights.activity import Activity
from insights.report import Report
from retrieval.knowledge_base import KnowledgeBase
from retrieval.library import AlreadyThere, BadName, Library, LibraryError, NotThere, entry
from web.operator_check import OperatorCheck
from web.operator_forms import Desk, Listed, answer_page, outcome_page

log = logging.getLogger(__name__)
MAX_FILES = 20  # in one upload
MAX_ANSWER_CHARS = 5000
MAX_ACTIVITY = 50  # changes the page lists; the download holds every one
STATUS = {BadName: 400, AlreadyThere: 409, NotThere: 404}
Preview = Callable[[str, str | None, bool], Awaitable[object]]  # `chat.preview.preview` with the app bound


class Editing:
    def __init__(self, check: OperatorCheck, library: Library, knowledge: KnowledgeBase, activity: Activity,
                 preview: Preview, personas: list[str], build: Callable[[date, date], Report]) -> None:
        self.check, self.library, self.knowledge, self.activity = check, library, knowledge, activity
        self.preview, self.personas, self.build = preview, personas, build

    def routes(self, figures: Callable[[Request], Awaitable[Report | Response]]) -> list[Route]:
        """`figures(request)`: the report of the period the request names, or the answer saying why not."""
        self.figures = figures
        return [Route("/operator/documents.json", self.listing),
                Route("/operator/documents", self.upload, methods=["POST"]),
                Route("/operator/documents/{name}", self.delete, methods=["DELETE", "POST"]),
                Route("/operator/restore/{kept}", self.restore, methods=["POST"]),
                Route("/operator/answers", self.answer, methods=["POST"]),
                Route("/operator/try", self.tried, methods=["GET", "POST"]),
                Route("/operator/activity.{form}", self.activity_download)]

    async def desk(self, request: Request, report: Report) -> Desk:
        documents, kept, activity = await asyncio.gather(asyncio.to_thread(self._listed, report),
                                                         asyncio.to_thread(self.library.kept),
                                                         asyncio.to_thread(self.activity.latest, MAX_ACTIVITY))
        return Desk(documents, kept, activity, self.check.form_token(request), self.personas,
                    not self.knowledge.ready.is_set())

    async def listing(self, request: Request) -> Response:
        if refused := self.check.refused(request):
            return refused
        report = await self.figures(request)
        if isinstance(report, Response):
            return report
        documents, kept = await asyncio.gather(asyncio.to_thread(self._listed, report),
                                               asyncio.to_thread(self.library.kept))
        return JSONResponse({"documents": [asdict(document) for document in documents],
                             "kept": [asdict(item) for item in kept], "use": asdict(report.documents)},
                            headers={"cache-control": "no-store"})

    async def upload(self, request: Request) -> Response:
        if refused := self.check.refused(request):
            return refused
        try:
            form = await request.form(max_files=MAX_FILES, max_fields=10)
        except MultiPartException as error:
            return _problem(request, 400, f"The upload could not be read ({error}): send the files as the multipart "
                                          f"field `file`, at most {MAX_FILES} at once.")
        try:
            if forged := self._forged(request, str(form.get("csrf") or request.headers.get("x-csrf-token", ""))):
                return forged
            files = [item for item in form.getlist("file") if isinstance(item, UploadFile)]
            if not files:
                return _problem(request, 400, "No file was sent: choose one or several, as the multipart field `file`.")
            replace, who, outcomes = form.get("replace") in ("1", "on", "true", "yes"), self.check.name(request), []
            for item in files:
                try:
                    name, replaced = await asyncio.to_thread(self.library.save, item.filename or "", item.file, replace)
                except LibraryError as error:
                    outcomes.append({"file": item.filename, "error": str(error), "status": STATUS[type(error)]})
                    continue
                await asyncio.to_thread(self.activity.record, who, "replace" if replaced else "upload", name)
                outcomes.append({"file": name, "replaced": replaced})
        finally:
            await form.close()  # the files spooled to disk go
        return await self._indexed(request, outcomes)

    async def delete(self, request: Request) -> Response:
        if refused := self.check.refused(request):
            return refused
        if request.method == "POST":
            form = await request.form(max_files=0, max_fields=5)
            if str(form.get("action")) != "delete":
                return _problem(request, 400, "POST here with action=delete, or send DELETE.")
            given = str(form.get("csrf") or "")
        else:
            given = request.headers.get("x-csrf-token", "")
        if forged := self._forged(request, given):
            return forged
        return await self._change(request, "delete", self.library.delete, request.path_params["name"])

    async def restore(self, request: Request) -> Response:
        if refused := self.check.refused(request):
            return refused
        form = await request.form(max_files=0, max_fields=5)
        if forged := self._forged(request, str(form.get("csrf") or request.headers.get("x-csrf-token", ""))):
            return forged
        return await self._change(request, "restore", self.library.restore, request.path_params["kept"])

    async def answer(self, request: Request) -> Response:
        if refused := self.check.refused(request):
            return refused
        if request.headers.get("content-type", "").startswith("application/json"):
            try:
                given = json.loads(await request.body())
            except ValueError:
                given = None
            if not isinstance(given, dict):
                return _problem(request, 400, 'Send a JSON object: {"question": …, "answer": …, "title": …}.')
            token = request.headers.get("x-csrf-token", "")
        else:
            form = await request.form(max_files=0, max_fields=10)
            given, token = {key: form.get(key) for key in ("question", "answer", "title", "names", "replace")}, str(
                form.get("csrf") or "")
        if forged := self._forged(request, token):
            return forged
        question, answer = str(given.get("question") or "").strip(), str(given.get("answer") or "").strip()
        if not question or not answer or len(answer) > MAX_ANSWER_CHARS:
            return _problem(request, 400, f"Write the question and its answer (at most {MAX_ANSWER_CHARS} characters).")
        title = " ".join(str(given.get("title") or question.rstrip("？?。. ")).split())[:80]
        names = given.get("names")  # the page's box: one per line; JSON: a list; neither: the group's wordings
        if isinstance(names, str):
            names = names.splitlines()
        elif not isinstance(names, list):
            names = await asyncio.to_thread(self._wordings, question)
        text = entry(title, answer, [question, *(str(name) for name in names)])
        replace = given.get("replace") in (True, "1", "on", "true", "yes")
        return await self._change(request, "answer", lambda name: self.library.write(name, text, replace)[0],
                                  f"{title}.md")

    async def tried(self, request: Request) -> Response:
        if refused := self.check.refused(request):
            return refused
        with_reply = request.method == "POST"
        if with_reply:
            form = await request.form(max_files=0, max_fields=5)
            question, persona = str(form.get("question") or ""), form.get("persona")
            if forged := self._forged(request, str(form.get("csrf") or request.headers.get("x-csrf-token", ""))):
                return forged
        else:
            question, persona = request.query_params.get("question", ""), request.query_params.get("persona")
        question = question.strip()[:2000]
        if not question:
            return _problem(request, 400, "Write a question to try (?question=…).")
        try:
            result = await self.preview(question, str(persona) if persona else None, with_reply)
        except Exception as error:  # the engine not loaded or out of memory: say so, keep the page
            log.warning("Operator's preview failed: %s", error)
            return _problem(request, 503, f"The guide could not reply now: {error}")
        if _wants_html(request):
            english = request.headers.get("accept-language", "").lower().startswith("en")
            return HTMLResponse(answer_page(result, self.check.form_token(request), english),
                                headers={"cache-control": "no-store"})
        return JSONResponse(asdict(result) | {"preview": True}, headers={"cache-control": "no-store"})

    async def activity_download(self, request: Request) -> Response:
        if refused := self.check.refused(request):
            return refused
        form = request.path_params["form"]
        if form == "csv":
            text = await asyncio.to_thread(self.activity.as_csv)
            return Response(text, media_type="text/csv; charset=utf-8", headers={
                "content-disposition": 'attachment; filename="activity.csv"', "cache-control": "no-store"})
        if form == "json":
            changes = await asyncio.to_thread(self.activity.latest)
            return JSONResponse([asdict(change) for change in changes], headers={"cache-control": "no-store"})
        return JSONResponse({"detail": "No such download: activity.csv or activity.json."}, status_code=404)

    async def _change(self, request: Request, action: str, change: Callable[[str], str], name: str) -> Response:
        try:
            done = await asyncio.to_thread(change, name)
        except LibraryError as error:
            return _problem(request, STATUS[type(error)], str(error))
        await asyncio.to_thread(self.activity.record, self.check.name(request), action, done)
        return await self._indexed(request, [{"file": done, action: True}])

    async def _indexed(self, request: Request, outcomes: list[dict]) -> Response:
        """Index what changed, then answer with each file's outcome (and, for a file saved, how the guide reads it)."""
        saved = [outcome for outcome in outcomes if "error" not in outcome]
        if saved:
            await asyncio.to_thread(self.knowledge.sync_all, False)
            contents = await asyncio.to_thread(self.knowledge.index.contents, self.library.folder)
            for outcome in saved:
                if read := contents.get(outcome["file"]):
                    outcome |= {"passages": len(read.passages), "unreadable": read.problem}
        if _wants_html(request) and len(saved) == len(outcomes):
            return RedirectResponse("/operator#documents", status_code=303)
        status = 200 if saved else outcomes[0].get("status", 400)
        if _wants_html(request):
            english = request.headers.get("accept-language", "").lower().startswith("en")
            return HTMLResponse(outcome_page(outcomes, english), status_code=status)
        return JSONResponse({"files": outcomes}, status_code=status)

    def _forged(self, request: Request, given: str) -> Response | None:
        if self.check.forged(request, given):
            return _problem(request, 403, "This change did not come from the operator's page (its form token is "
                                          "missing or old): reload /operator and try again.")
        return None

    def _listed(self, report: Report) -> list[Listed]:
        use = report.documents
        contents = self.knowledge.index.contents(self.library.folder)
        listed = []
        for name, read in sorted(contents.items()):
            stem = name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            listed.append(Listed(name, read.title, read.problem, read.passages, use.documents.get(stem, 0),
                                 use.questions.get(stem, []), "/" not in name))
        return listed

    def _wordings(self, question: str) -> list[str]:
        """The wordings of the unanswered group `question` is one of (in the last year), else none."""
        today = date.today()
        for group in self.build(today - timedelta(days=364), today + timedelta(days=1)).unanswered:
            if question in (group.question, *group.wordings):
                return group.wordings
        return []



def _wants_html(request: Request) -> bool:
    return "text/html" in request.headers.get("accept", "")


def _problem(request: Request, status: int, detail: str) -> Response:
    if _wants_html(request):
        english = request.headers.get("accept-language", "").lower().startswith("en")
        return HTMLResponse(outcome_page([{"error": detail}], english), status_code=status)
    return JSONResponse({"detail": detail}, status_code=status)

