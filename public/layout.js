// Whether Chainlit's page lays its side view over the chat (as a sheet, below 768 px wide), told to the server in a
// cookie before the chat's socket opens: a chat started on a narrow screen, whatever its browser says it is (a phone,
// an iPad in split view, a phone in "desktop site" mode, a narrow window), keeps its statistics closed (chat.session).
(function () {
  const narrow = window.matchMedia("(max-width: 767.98px)");
  const tell = () => { document.cookie = `narrow_screen=${narrow.matches ? 1 : 0}; path=/; SameSite=Lax`; };
  tell();
  narrow.addEventListener("change", tell);
})();
