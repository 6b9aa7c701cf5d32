// The nbagent session page: a session browser, and a read-only live view of one session.
// Event HTML comes from the server, rendered and sanitized by nbagent's one renderer (nh3 allow-list);
// everything else from the API (names, titles, statuses, streamed text) is only ever set as text.
(function () {
  "use strict";
  const base = document.body.dataset.baseUrl || "/";
  const api = base + "nbagent/api/";
  const params = new URLSearchParams(window.location.search);
  const main = document.getElementById("nbagent-main");
  const where = document.getElementById("nbagent-where");
  const enc = encodeURIComponent;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // Jupyter's XSRF token, sent as JupyterLab sends it (GET requests do not need it; it costs nothing).
  function xsrf() {
    const found = document.cookie.split("; ").find((c) => c.startsWith("_xsrf="));
    return found ? decodeURIComponent(found.slice(6)) : "";
  }

  async function getJSON(url) {
    const headers = { Accept: "application/json" };
    if (xsrf()) headers["X-XSRFToken"] = xsrf();
    const reply = await fetch(url, { credentials: "same-origin", headers });
    let body = {};
    try {
      body = await reply.json();
    } catch (e) {
      body = {};
    }
    if (!reply.ok) throw new Error(body.message || reply.status + " " + reply.statusText);
    return body;
  }

  // The theme ----------------------------------------------------------------------------------------
  // This page is a tab of its own: it reads the user's JupyterLab theme (Settings > Theme, which Notebook 7 shares)
  // through the server's settings API. Without a setting of the user's (or without JupyterLab on the server) the
  // system's colour scheme decides (the page's CSS: prefers-color-scheme).
  const THEMES = base + "lab/api/settings/@jupyterlab/apputils-extension:themes";
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");
  let themeSetting = null;

  // "dark", "light", or "" (follow the system), from the setting's user values and its defaults.
  function themeOf(setting, dark) {
    if (!setting) return "";
    const user = setting.settings || {};
    const properties = (setting.schema && setting.schema.properties) || {};
    const value = (key) => (Object.prototype.hasOwnProperty.call(user, key) ? user[key] : (properties[key] || {}).default);
    const isDark = (name) => (/dark/i.test(String(name || "")) ? "dark" : "light");
    if (value("adaptive-theme") === true) return isDark(value(dark ? "preferred-dark-theme" : "preferred-light-theme"));
    if (Object.prototype.hasOwnProperty.call(user, "theme")) return isDark(user.theme);
    return isDark(value("theme")) === "dark" ? "dark" : ""; // an administrator's dark default (overrides.json) counts too
  }

  function applyTheme() {
    const theme = themeOf(themeSetting, systemDark.matches);
    const root = document.documentElement;
    if (theme) root.dataset.theme = theme;
    else delete root.dataset.theme;
    root.dataset.themeFrom = theme ? "jupyterlab" : "system";
  }

  async function readTheme() {
    try {
      themeSetting = await getJSON(THEMES);
    } catch (e) {
      themeSetting = null; // no JupyterLab settings here: the system's colour scheme
    }
    applyTheme();
  }
  readTheme();
  systemDark.addEventListener("change", applyTheme);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") readTheme(); // the theme may have changed in JupyterLab meanwhile
  });

  function when(ts) {
    return ts ? new Date(ts * 1000).toLocaleString() : "-";
  }

  // The server already makes links to loopback hosts inert; only the page knows the host the browser uses for
  // the server (Jupyter's cookie goes to every port of it): a link there becomes its text and its URL, as text.
  const LOOPBACK = /^(localhost|.+\.localhost|127(\.\d+){3}|0(\.\d+){3}|\[::1?\]|\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\])\.?$/;
  function inertLocalLinks(html) {
    const holder = document.createElement("template");
    holder.innerHTML = html;
    holder.content.querySelectorAll("a[href]").forEach((link) => {
      let url = null;
      try {
        url = new URL(link.getAttribute("href"), window.location.href);
      } catch (e) {
        url = null;
      }
      const elsewhere = url && /^https?:$/.test(url.protocol) && url.hostname !== window.location.hostname && !LOOPBACK.test(url.hostname);
      if (elsewhere || (url && url.protocol === "mailto:")) return;
      link.replaceWith(document.createTextNode(link.textContent + " (" + link.getAttribute("href") + ")"));
    });
    return holder.content;
  }

  function showError(message) {
    main.appendChild(el("p", "nbagent-error-box", message));
  }

  // The session browser ------------------------------------------------------------------------------
  async function browse(path) {
    where.textContent = path ? "under " + path : "under the server's root";
    let listing;
    try {
      listing = await getJSON(api + "sessions?path=" + enc(path));
    } catch (e) {
      showError("Cannot list sessions: " + e.message);
      return;
    }
    if (!listing.sessions.length) {
      main.appendChild(el("p", "", "No agent sessions here yet."));
      return;
    }
    const table = el("table", "nbagent-sessions");
    const head = table.createTHead().insertRow();
    for (const name of ["Notebook", "Session", "Title", "Turns", "Tokens", "Cost", "Context", "Status", "Who wrote it", "Last activity"]) {
      head.appendChild(el("th", "", name));
    }
    const body = table.createTBody();
    for (const s of listing.sessions) {
      const row = body.insertRow();
      row.className = "nbagent-session-row";
      row.dataset.session = s.name;
      row.insertCell().textContent = s.notebook;
      const link = el("a", "nbagent-session-link", s.name);
      link.href = "?notebook=" + enc(s.notebook) + "&session=" + enc(s.name);
      row.insertCell().appendChild(link);
      const fork = s.parent ? "(fork of " + (s.parent_name || s.parent.slice(0, 8)) + " at event " + s.forked_at + ") " : "";
      row.insertCell().textContent = fork + (s.title || "-"); // where a fork came from (nbagent/state/lineage.py)
      row.insertCell().textContent = s.turns;
      row.insertCell().textContent = s.tokens_text || "-"; // the words every view says them in (render/parts.tokens_words)
      row.insertCell().textContent = s.cost_text || "-"; // dollars, or "cost unknown" (nbagent/state/prices.py)
      if (s.cost_why) row.cells[row.cells.length - 1].title = s.cost_why;
      row.insertCell().textContent = s.context;
      row.insertCell().textContent = s.status;
      row.insertCell().textContent = s.trust || "unreadable";
      row.insertCell().textContent = when(s.last_ts);
    }
    main.appendChild(table);
  }

  // The live view ------------------------------------------------------------------------------------
  // Keeping the live end in view: while the reader is at the end of the page, what comes is scrolled into view; once
  // they scroll up, the page stays where they are (a button brings them back) until they are at the end again.
  function follower() {
    const page = document.scrollingElement || document.documentElement;
    const jump = el("button", "nbagent-jump", "\u2193 live end");
    jump.type = "button";
    jump.hidden = true;
    document.body.appendChild(jump);
    let following = true;
    let scheduled = false;
    const atEnd = () => page.scrollHeight - page.scrollTop - page.clientHeight <= 24;
    const toEnd = () => {
      page.scrollTop = page.scrollHeight;
    };
    window.addEventListener(
      "scroll",
      () => {
        following = atEnd();
        if (following) jump.hidden = true;
        document.body.dataset.following = String(following);
      },
      { passive: true },
    );
    jump.addEventListener("click", () => {
      following = true;
      jump.hidden = true;
      toEnd();
    });
    document.body.dataset.following = "true";
    return function grown() {
      if (!following) {
        jump.hidden = false;
        return;
      }
      if (scheduled) return;
      scheduled = true;
      window.requestAnimationFrame(() => {
        scheduled = false;
        if (following) toEnd();
      });
    };
  }

  function live(notebook, session) {
    const sessionUrl = api + "sessions/" + enc(notebook) + "/" + enc(session);
    where.textContent = notebook + " / " + session;
    const header = el("div", "nbagent-header nbagent-live-header");
    const title = el("b", "nbagent-title", session);
    const status = el("span", "nbagent-dim nbagent-status", "");
    const connection = el("span", "nbagent-connection", "connecting");
    const labels = el("div", "nbagent-origin nbagent-labels", "");
    header.append(title, " ", status, " ", connection, labels);
    const transcript = el("div", "nbagent-transcript");
    transcript.id = "nbagent-transcript";
    main.append(header, transcript);
    const grown = follower();

    let lastSeq = 0;
    let streamed = null;
    let source = null;
    let retry = null;
    let opened = {}; // the listing's row, until the stream says how the session stands
    let now = null; // the session as the last event left it (the stream's records)
    let tail = {};
    let part = el("section", "nbagent-turn-start"); // what comes before the first request, then one section per turn
    transcript.appendChild(part);

    let connected = "connecting";
    function setConnection(state) {
      connected = state;
      showBadge();
    }

    // "live" only while the session's last turn may run; connected to a session that stopped (done, at its budget,
    // interrupted), the badge says how it stands (the stream's "standing") and still shows what comes next.
    function showBadge() {
      const standing = now && now.standing ? now.standing : "";
      connection.dataset.state = connected;
      connection.dataset.running = String(!standing);
      connection.textContent = connected === "live" && standing ? standing : connected;
      connection.title = connected === "live" && standing ? "not running now; connected: anything written next shows here" : "";
    }

    function showHeader() {
      const shown = now || opened;
      const name = (now && now.request) || shown.title || session;
      title.textContent = name;
      title.title = shown.title && shown.title !== name ? "session: " + shown.title : "";
      document.title = name + " - nbagent";
      showLabels();
    }

    function showLabels() {
      const parts = [];
      // Who wrote it: the stream's notice, from the signature check that decides what runs (never the listing's index row).
      if (tail.trust) parts.push("written by: " + tail.trust);
      const shown = now || opened;
      if (shown.turns) parts.push(shown.turns + (shown.turns === 1 ? " turn" : " turns"));
      // How it stands: an unfinished turn is said until it ends (the status line says what it is doing).
      if (shown.status && shown.status !== "complete") parts.push((now ? "" : "when opened: ") + shown.status);
      if (tail.torn) parts.push("the last line is unfinished (being written, or cut short)");
      labels.textContent = parts.join(" \u00b7 ");
      let box = document.getElementById("nbagent-problem");
      if (tail.problem && !box) {
        box = el("div", "nbagent-label-warn", "");
        box.id = "nbagent-problem";
        header.appendChild(box);
      }
      // Damage is labelled as such; a log that cannot be read now (a database away) says why in its own words.
      if (box) box.textContent = tail.problem ? (tail.damaged ? "damaged log: " : "") + tail.problem : "";
    }

    getJSON(api + "sessions?path=" + enc(notebook))
      .then((listing) => {
        const found = listing.sessions.find((s) => s.name === session);
        if (found) {
          opened = found;
          showHeader();
        }
      })
      .catch(() => {});

    function newTurn(number) {
      part = el("section", "nbagent-turn");
      part.dataset.turn = String(number);
      const heading = el("div", "nbagent-turn-heading", "Turn " + number);
      heading.setAttribute("role", "heading");
      heading.setAttribute("aria-level", "2");
      part.appendChild(heading);
      transcript.appendChild(part);
    }

    function apply(record) {
      if (record.stream && streamed) {
        streamed.remove();
        streamed = null;
      }
      if (record.type === "user_msg") newTurn(record.session ? record.session.turns : transcript.querySelectorAll(".nbagent-turn").length + 1);
      if (record.html) part.appendChild(inertLocalLinks(record.html)); // sanitized by the server (nh3)
      if (typeof record.text === "string") {
        if (!streamed) {
          streamed = el("div", "nbagent-text nbagent-streaming", "");
          part.appendChild(streamed);
        }
        streamed.textContent += record.text;
      }
      if (record.status) status.textContent = "\u2014 " + record.status;
      if (record.session) {
        now = record.session;
        showHeader();
        showBadge();
      }
    }

    function connect() {
      retry = null;
      // A new EventSource sends no Last-Event-ID: ?since= carries it. The browser's own reconnects send the header.
      source = new EventSource(sessionUrl + "/stream?since=" + lastSeq);
      source.onopen = () => setConnection("live");
      source.onmessage = (message) => {
        const record = JSON.parse(message.data);
        if (record.seq <= lastSeq) return;
        if (record.seq !== lastSeq + 1) document.body.dataset.gaps = String(Number(document.body.dataset.gaps || 0) + 1);
        apply(record);
        lastSeq = record.seq;
        document.body.dataset.lastSeq = String(lastSeq);
        grown();
      };
      source.addEventListener("session", (message) => {
        tail = JSON.parse(message.data);
        showLabels();
      });
      source.addEventListener("problem", (message) => {
        tail = Object.assign({}, tail, JSON.parse(message.data));
        showLabels();
      });
      source.onerror = () => {
        setConnection("reconnecting");
        if (source.readyState === EventSource.CLOSED && retry === null) {
          source.close();
          retry = window.setTimeout(connect, 1000); // an HTTP error ends an EventSource: start a new one from lastSeq
        }
      };
    }
    connect();
  }

  const notebook = params.get("notebook");
  const session = params.get("session");
  if (notebook && session) live(notebook, session);
  else browse(params.get("path") || "");
})();
