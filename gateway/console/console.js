// headwater's web console: a client of the server's HTTP API (/ksql, /query-stream, /close-query,
// /query for PRINT, /info, /clusterStatus), in plain JavaScript with no library and no build step.
// Everything the server sends is put in the page as text (never as HTML).
"use strict";

const REFRESH_MS = 3000;
const MAX_CARDS = 30;
const MAX_TAIL_ROWS = 500;
const LAG_WINDOW_MS = 10 * 60 * 1000;
const HISTORY_KEY = "headwater.console.history";
const HISTORY_MAX = 200;
const DELIMITED = "application/vnd.ksqlapi.delimited.v1";
const READ_AFTER = "headwater.read.after";
const KEYWORDS = [...new Set(`SELECT FROM WHERE EMIT CHANGES FINAL LIMIT GROUP BY HAVING PARTITION
  WINDOW TUMBLING HOPPING SESSION SIZE ADVANCE RETENTION GRACE PERIOD JOIN LEFT RIGHT FULL OUTER
  INNER ON WITHIN AS AND OR NOT NULL IS IN BETWEEN LIKE CASE WHEN THEN ELSE END CAST CREATE REPLACE
  STREAM STREAMS TABLE TABLES TYPE TYPES INSERT INTO VALUES DROP DELETE TOPIC TOPICS IF EXISTS SHOW
  LIST DESCRIBE EXTENDED EXPLAIN TERMINATE QUERIES PRINT BEGINNING INTERVAL SET UNSET DEFINE
  UNDEFINE VARIABLES PROPERTIES FUNCTIONS FUNCTION KEY PRIMARY HEADERS HEADER WITH KAFKA_TOPIC
  VALUE_FORMAT KEY_FORMAT FORMAT PARTITIONS REPLICAS TIMESTAMP STRING VARCHAR INT INTEGER BIGINT
  DOUBLE DECIMAL BOOLEAN BYTES DATE TIME ARRAY MAP STRUCT ASSERT SCHEMA ALL TRUE FALSE`.split(/\s+/))];
const SOURCE_CONTEXT = new Set(["FROM", "JOIN", "INTO", "DESCRIBE", "TABLE", "STREAM"]);
const QUERY_CONTEXT = new Set(["EXPLAIN", "TERMINATE"]);
const PALETTE = ["#2f6fdf", "#d9480f", "#2b8a3e", "#ae3ec9", "#e8590c", "#0c8599", "#c2255c", "#5c940d"];

const state = {
  sources: new Map(), // name -> {kind, topic, fields: [{name, schema, type}]}
  queries: [], // SHOW QUERIES EXTENDED's descriptions
  functions: [],
  properties: {}, // SET 'name' = 'value'
  variables: {}, // DEFINE name = 'value'
  written: new Map(), // "topic/partition" -> highest offset our INSERTs wrote (read-your-writes)
  sequence: null, // highest commandSequenceNumber answered: later /ksql requests wait for it
  streams: new Set(), // running push queries and PRINTs
  lags: [], // [{t, values: Map(series -> lag)}], the last LAG_WINDOW_MS
  history: loadHistory(),
  historyAt: null,
  inFlight: 0,
};

const $ = (id) => document.getElementById(id);

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

// -- the HTTP API ----------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super(body.message || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function errorOf(response) {
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    body = { message: text.trim() || response.statusText || `HTTP ${response.status}` };
  }
  return new ApiError(response.status, body);
}

async function post(path, body, accept = "application/json", signal = undefined) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: accept },
    body: JSON.stringify(body),
    cache: "no-store",
    signal,
  });
  if (!response.ok) throw await errorOf(response);
  return response;
}

async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

function noteEntities(entities) {
  for (const entity of entities || []) {
    const number = entity.commandSequenceNumber;
    if (Number.isInteger(number) && number >= 0) state.sequence = Math.max(state.sequence ?? -1, number);
  }
}

function noteWritten(header) {
  let items = [];
  try {
    items = JSON.parse(header || "[]");
  } catch {
    return [];
  }
  for (const item of Array.isArray(items) ? items : []) {
    if (typeof item.topic !== "string" || !Number.isInteger(item.partition)) continue;
    const key = JSON.stringify([item.topic, item.partition]);
    state.written.set(key, Math.max(state.written.get(key) ?? -1, item.offset));
  }
  return items;
}

function readAfter() {
  return [...state.written].map(([key, offset]) => {
    const [topic, partition] = JSON.parse(key);
    return { topic, partition, offset };
  });
}

/** POST /ksql: {entities, written}; the request waits for the commands this page saw answered. */
async function ksql(text) {
  const body = { ksql: text, streamsProperties: { ...state.properties }, sessionVariables: { ...state.variables } };
  if (state.sequence !== null) body.commandSequenceNumber = state.sequence;
  try {
    const response = await post("/ksql", body);
    const written = noteWritten(response.headers.get("Headwater-Written-Offsets"));
    const entities = await response.json();
    noteEntities(entities);
    return { entities, written };
  } catch (error) {
    if (error instanceof ApiError) noteEntities(error.body.entities);
    throw error;
  }
}

async function* lines(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffered = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffered += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 1);
        yield line;
      }
    }
    buffered += decoder.decode();
    if (buffered) yield buffered;
  } finally {
    reader.releaseLock();
  }
}

// -- statements ------------------------------------------------------------------------------------

/** The statements of a script, split at `;` outside quotes and comments, each ending with `;`. */
function splitStatements(text) {
  const found = [];
  let start = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === "'" || c === '"' || c === "`") {
      i++;
      while (i < text.length && !(text[i] === c && text[i + 1] !== c)) i += text[i] === c ? 2 : 1;
    } else if (c === "-" && text[i + 1] === "-") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      i = end < 0 ? text.length : end + 1;
    } else if (c === ";") {
      found.push(text.slice(start, i + 1));
      start = i + 1;
    }
    i++;
  }
  found.push(text.slice(start));
  return found
    .map((s) => s.trim())
    .filter((s) => leading(s).replace(/;$/, "").trim())
    .map((s) => (s.endsWith(";") ? s : `${s};`));
}

function leading(statement) {
  return statement.replace(/^(\s+|--[^\n]*(\n|$)|\/\*[\s\S]*?\*\/)+/, "");
}

const QUOTED = "'((?:[^']|'')*)'";
const LOCAL = [
  [new RegExp(`^SET\\s+${QUOTED}\\s*=\\s*${QUOTED}\\s*;$`, "i"), (m) => setProperty(m[1], m[2])],
  [new RegExp(`^UNSET\\s+${QUOTED}\\s*;$`, "i"), (m) => setProperty(m[1], null)],
  [new RegExp(`^DEFINE\\s+([A-Za-z_]\\w*)\\s*=\\s*${QUOTED}\\s*;$`, "i"), (m) => define(m[1], m[2])],
  [/^UNDEFINE\s+([A-Za-z_]\w*)\s*;$/i, (m) => define(m[1], null)],
];

function setProperty(name, value) {
  name = name.replaceAll("''", "'");
  if (value === null) delete state.properties[name];
  else state.properties[name] = value.replaceAll("''", "'");
  return value === null ? `Unset '${name}' for this page's requests.` : `Set '${name}' = '${state.properties[name]}' for this page's requests.`;
}

function define(name, value) {
  if (value === null) delete state.variables[name];
  else state.variables[name] = value.replaceAll("''", "'");
  return value === null ? `Undefined ${name}.` : `Defined ${name} = '${state.variables[name]}'.`;
}

function kindOf(statement) {
  const text = leading(statement);
  const word = (text.match(/^[A-Za-z]+/) || [""])[0].toUpperCase();
  if (word === "SELECT") return /\bEMIT\s+CHANGES\b/i.test(text) ? "push" : "pull";
  if (word === "PRINT") return "print";
  if (LOCAL.some(([pattern]) => pattern.test(text))) return "local";
  return "ksql";
}

async function run(text) {
  const statements = splitStatements(text);
  if (!statements.length) return;
  remember(text);
  let batch = [];
  const flush = async () => {
    if (!batch.length) return true;
    const sql = batch.join("\n");
    batch = [];
    return runKsql(sql);
  };
  for (const statement of statements) {
    const kind = kindOf(statement);
    if (kind === "ksql") {
      batch.push(statement);
      continue;
    }
    if (!(await flush())) return;
    if (kind === "local") {
      const local = leading(statement);
      const [pattern, apply] = LOCAL.find(([p]) => p.test(local));
      newCard(statement, "local").body.append(h("p", { class: "ok" }, apply(local.match(pattern))));
    } else if (!(await (kind === "print" ? runPrint(statement) : runQuery(statement, kind === "push")))) {
      return;
    }
  }
  await flush();
  refreshSoon();
}

function busy(delta) {
  state.inFlight += delta;
  const waiting = state.inFlight - state.streams.size;
  const live = state.streams.size;
  $("busy").textContent = [waiting > 0 ? "running\u2026" : "", live ? `${live} streaming` : ""].filter(Boolean).join(" \u00b7 ");
}

async function runKsql(sql) {
  const card = newCard(sql, "ksql");
  busy(1);
  try {
    const { entities, written } = await ksql(sql);
    for (const item of written) {
      card.body.append(h("p", { class: "ok" }, `Inserted a row into ${item.topic} (partition ${item.partition}, offset ${item.offset}).`));
    }
    renderEntities(card.body, entities);
    if (!entities.length && !written.length) card.body.append(h("p", { class: "ok" }, "Done."));
    return true;
  } catch (error) {
    if (error instanceof ApiError) renderEntities(card.body, error.body.entities || []);
    card.body.append(renderError(error, sql));
    card.el.dataset.kind = "error";
    return false;
  } finally {
    busy(-1);
  }
}

/** A SELECT over /query-stream: a pull answer (with its staleness) or a push query's live tail. */
async function runQuery(sql, push) {
  const card = newCard(sql, push ? "push" : "pull");
  const properties = { ...state.properties };
  if ($("earliest").checked) properties["auto.offset.reset"] = "earliest";
  if (!push && state.written.size && !(READ_AFTER in properties)) properties[READ_AFTER] = readAfter();
  const stream = startStream(card);
  const view = rowsView(card.body, push);
  return settle(card, sql, stream, async () => {
    let ok = true;
    const response = await post("/query-stream", { sql, properties, sessionVariables: { ...state.variables } }, DELIMITED, stream.controller.signal);
    let header = null;
    for await (const line of lines(response.body)) {
      if (!line.trim()) continue;
      const item = JSON.parse(line);
      if (header === null) {
        header = item;
        stream.queryId = item.queryId;
        view.header(item);
        if (!push) card.body.append(staleness(item));
        setStatus(card, push ? "running" : "reading");
      } else if (Array.isArray(item)) {
        view.row(item);
      } else if (item.errorMessage) {
        card.body.append(renderError(new ApiError(500, item.errorMessage), sql));
        ok = false;
      } else if (item.finalMessage) {
        view.note(item.finalMessage);
      }
    }
    return ok;
  });
}

/** PRINT over /query: the topic's records as text lines, as they arrive. */
async function runPrint(sql) {
  const card = newCard(sql, "print");
  const properties = { ...state.properties };
  if ($("earliest").checked) properties["auto.offset.reset"] = "earliest";
  const stream = startStream(card);
  const out = h("pre", { class: "print" });
  card.body.append(out);
  return settle(card, sql, stream, async () => {
    const response = await post("/query", { ksql: sql, streamsProperties: properties, sessionVariables: { ...state.variables } }, "text/plain", stream.controller.signal);
    stream.queryId = response.headers.get("X-Query-Id");
    setStatus(card, "running");
    for await (const line of lines(response.body)) {
      if (!line) continue;
      out.append(`${line}\n`);
      while (out.childNodes.length > MAX_TAIL_ROWS) out.firstChild.remove();
      out.scrollTop = out.scrollHeight;
    }
    return true;
  });
}

/** Reads a stream (`read` answers whether it ended well) and settles its card: done, failed or
 * stopped (a Stop aborts the connection: that abort is no failure). */
async function settle(card, sql, stream, read) {
  try {
    const ok = await read();
    setStatus(card, stream.stopped ? "stopped" : ok ? "done" : "failed");
    return ok;
  } catch (error) {
    if (stream.stopped && error.name === "AbortError") {
      setStatus(card, "stopped");
      return true;
    }
    card.body.append(renderError(error, sql));
    setStatus(card, "failed");
    return false;
  } finally {
    endStream(stream);
  }
}

function startStream(card) {
  const stream = { card, controller: new AbortController(), queryId: null, stopped: false };
  stream.button = h("button", { type: "button", class: "stop", onclick: () => stopStream(stream) }, "Stop");
  card.tools.append(stream.button);
  state.streams.add(stream);
  setStatus(card, "starting");
  syncStop();
  busy(1);
  return stream;
}

function endStream(stream) {
  state.streams.delete(stream);
  stream.button.remove();
  syncStop();
  busy(-1);
}

/** Stop: POST /close-query (the server ends the query), then drop the connection. */
async function stopStream(stream) {
  if (stream.stopped) return;
  stream.stopped = true;
  setStatus(stream.card, "stopping");
  if (stream.queryId) {
    try {
      await post("/close-query", { queryId: stream.queryId });
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) stream.card.body.append(renderError(error, ""));
    }
  }
  stream.controller.abort();
}

function syncStop() {
  $("stop").disabled = state.streams.size === 0;
}

// -- results ---------------------------------------------------------------------------------------

function newCard(statement, kind) {
  const status = h("span", { class: "status" });
  const tools = h("span", { class: "tools" });
  const body = h("div", { class: "body" });
  const el = h("article", { class: "card", dataset: { kind } },
    h("header", {}, h("pre", { class: "stmt" }, statement), status, tools), body);
  const results = $("results");
  results.prepend(el);
  const cards = [...results.children];
  for (const old of cards.slice(MAX_CARDS)) if (!["running", "starting", "reading"].includes(old.dataset.status)) old.remove();
  showTab("results");
  return { el, body, tools, status };
}

function setStatus(card, status) {
  card.el.dataset.status = status;
  card.status.textContent = status;
}

function cell(value) {
  if (value === null || value === undefined) return h("td", { class: "null" }, "null");
  if (typeof value === "object") return h("td", {}, JSON.stringify(value));
  return h("td", { class: typeof value === "number" ? "num" : null }, String(value));
}

function table(columns, rows, attrs = {}) {
  return h("table", attrs,
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, row.map(cell)))));
}

function rowsView(container, push) {
  const count = h("p", { class: "count muted" });
  const wrap = h("div", { class: "rows-wrap" });
  let body = null;
  let received = 0;
  container.append(wrap, count);
  const counted = () => {
    count.textContent = push
      ? `${received} row${received === 1 ? "" : "s"} received${received > MAX_TAIL_ROWS ? ` (the last ${MAX_TAIL_ROWS} shown)` : ""}`
      : `${received} row${received === 1 ? "" : "s"}`;
  };
  counted();
  return {
    header(header) {
      const names = header.columnNames || [];
      const types = header.columnTypes || [];
      body = h("tbody");
      wrap.append(h("table", { class: "rows" },
        h("thead", {}, h("tr", {}, names.map((name, i) => h("th", { title: types[i] || "" }, name)))), body));
    },
    row(values) {
      const atEnd = wrap.scrollTop + wrap.clientHeight >= wrap.scrollHeight - 4;
      body.append(h("tr", {}, values.map(cell)));
      received++;
      if (push && body.rows.length > MAX_TAIL_ROWS) body.rows[0].remove();
      if (push && atEnd) wrap.scrollTop = wrap.scrollHeight;
      counted();
    },
    note(message) {
      container.append(h("p", { class: "muted" }, message));
    },
  };
}

/** Where a pull answer was served from, per partition, and how far behind: never hidden. */
function staleness(header) {
  const served = header.servedBy || [];
  const box = h("div", { class: "staleness" });
  if (served.length) {
    box.append(h("h4", {}, "Served by"), table(["partition", "server", "position", "lag"],
      served.map((s) => [s.partition, s.host, s.position, s.lag ?? "unknown"])));
    for (const [i, s] of served.entries()) {
      const row = box.querySelectorAll("tbody tr")[i];
      row.className = s.lag === null || s.lag === undefined ? "lag-unknown" : s.lag > 0 ? "lag-behind" : "lag-none";
    }
  }
  if (header.writtenBy && header.writtenBy.length) {
    box.append(h("h4", {}, "Written by"), table(["query", "state", "lag behind its sources"],
      header.writtenBy.map((w) => [w.queryId, w.state, w.lag ?? "unknown"])));
  }
  return box;
}

function schemaText(schema) {
  if (!schema) return "";
  switch (schema.type) {
    case "ARRAY": return `ARRAY<${schemaText(schema.memberSchema)}>`;
    case "MAP": return `MAP<STRING, ${schemaText(schema.memberSchema)}>`;
    case "STRUCT": return `STRUCT<${(schema.fields || []).map((f) => `${f.name} ${schemaText(f.schema)}`).join(", ")}>`;
    case "DECIMAL": return `DECIMAL(${schema.parameters?.precision}, ${schema.parameters?.scale})`;
    default: return schema.type;
  }
}

function fieldsTable(fields) {
  return table(["column", "type", ""], (fields || []).map((f) => [f.name, schemaText(f.schema), f.type || ""]));
}

function describeSource(d) {
  const facts = [`${d.type} over topic ${d.topic}`, `${d.partitions} partition${d.partitions === 1 ? "" : "s"}`,
    `key ${d.keyFormat}, value ${d.valueFormat}`, d.windowType ? `windowed (${d.windowType})` : null,
    d.timestamp ? `timestamp ${d.timestamp}` : null].filter(Boolean);
  const queries = (list) => (list || []).map((q) => q.id).join(", ");
  return h("div", { class: "source" }, h("h3", {}, d.name), h("p", { class: "muted" }, facts.join(" \u00b7 ")),
    fieldsTable(d.fields),
    d.writeQueries?.length ? h("p", {}, `written by ${queries(d.writeQueries)}`) : null,
    d.readQueries?.length ? h("p", {}, `read by ${queries(d.readQueries)}`) : null,
    d.statistics ? h("p", {}, d.statistics) : null,
    d.errorStats ? h("p", { class: "warn" }, d.errorStats) : null);
}

const RENDERERS = {
  currentStatus: (e) => h("p", { class: "ok" }, e.commandStatus?.message || e.commandStatus?.status || "Done."),
  streams: (e) => table(["stream", "topic", "key format", "value format", "windowed"],
    e.streams.map((s) => [s.name, s.topic, s.keyFormat, s.valueFormat, s.isWindowed])),
  tables: (e) => table(["table", "topic", "key format", "value format", "windowed"],
    e.tables.map((s) => [s.name, s.topic, s.keyFormat, s.valueFormat, s.isWindowed])),
  sourceDescription: (e) => describeSource(e.sourceDescription),
  source_descriptions: (e) => e.sourceDescriptions.map(describeSource),
  queries: (e) => table(["query", "type", "state", "sinks", "statement"],
    e.queries.map((q) => [q.id, q.queryType, q.state, (q.sinks || []).join(", "), q.queryString])),
  query_descriptions: (e) => table(["query", "state", "sources", "sinks", "statistics"],
    e.queryDescriptions.map((q) => [q.id, q.state, q.sources.join(", "), q.sinks.join(", "), q.statistics || ""])),
  queryDescription: (e) => renderPlan(e.queryDescription),
  type_list: (e) => table(["type", "schema"], Object.entries(e.types).map(([n, s]) => [n, schemaText(s)])),
  kafka_topics: (e) => table(["topic", "partitions"], e.topics.map((t) => [t.name, t.replicaInfo.length])),
  kafka_topics_extended: (e) => table(["topic", "partitions", "consumers", "consumer groups"],
    e.topics.map((t) => [t.name, t.replicaInfo.length, t.consumerCount, t.consumerGroupCount])),
  function_names: (e) => table(["function", "type", "category"], e.functions.map((f) => [f.name, f.type, f.category])),
  properties: (e) => table(["property", "scope", "value"], e.properties.map((p) => [p.name, p.scope, p.value])),
  variables: (e) => table(["variable", "value"], e.variables.map((v) => [v.name, v.value])),
  describe_function: (e) => [h("h3", {}, `${e.name} (${e.type})`), h("p", {}, e.description),
    table(["arguments", "returns", "description"], e.functions.map((f) => [f.argumentTypes.join(", "), f.returnType, f.description]))],
};

function renderEntities(container, entities) {
  for (const entity of entities) {
    const render = RENDERERS[entity["@type"]];
    let shown;
    try {
      shown = render ? render(entity) : null;
    } catch {
      shown = null; // a shape this page does not know: shown as it came
    }
    append(container, [shown ?? h("pre", { class: "json" }, JSON.stringify(entity, null, 2))]);
    for (const warning of entity.warnings || []) container.append(h("p", { class: "warn" }, warning.message));
  }
}

/** An error as the server gave it: code, message, and where in the statements it is. */
function renderError(error, sent) {
  const body = error instanceof ApiError ? error.body
    : { message: error instanceof TypeError ? `the server did not answer: ${error.message}` : String(error?.message || error) };
  const code = body.error_code ? ` ${body.error_code}` : error.status ? ` (HTTP ${error.status})` : "";
  const box = h("div", { class: "error", role: "alert" }, h("strong", {}, `Error${code}`), h("pre", { class: "message" }, body.message || ""));
  if (Number.isInteger(body.line)) {
    box.append(h("p", { class: "where" }, `line ${body.line}${Number.isInteger(body.column) ? `, column ${body.column}` : ""}`));
    const shown = sent.split("\n")[body.line - 1];
    if (shown !== undefined && Number.isInteger(body.column)) {
      box.append(h("pre", { class: "caret" }, `${shown}\n${" ".repeat(Math.max(0, body.column - 1))}^`));
    }
  } else if (body.statementText && body.statementText.trim() !== sent.trim()) {
    box.append(h("pre", { class: "stmt" }, body.statementText));
  }
  return box;
}

// -- a query's plan, drawn -------------------------------------------------------------------------

function renderPlan(d) {
  const W = 190, H = 46, GAP = 18, X = [10, 290, 570];
  const sources = d.sources || [], sinks = d.sinks || [];
  const rows = Math.max(sources.length, sinks.length, 1);
  const height = rows * (H + GAP) + GAP;
  const top = (i, n) => (height - n * (H + GAP) + GAP) / 2 + i * (H + GAP);
  const box = (x, y, label, sub, kind) => svg("g", { class: `node ${kind}` },
    svg("title", {}, `${label}${sub ? ` (${sub})` : ""}`),
    svg("rect", { x, y, width: W, height: H, rx: 6 }),
    svg("text", { x: x + W / 2, y: y + 19, "text-anchor": "middle", class: "label" }, clip(label)),
    sub ? svg("text", { x: x + W / 2, y: y + 36, "text-anchor": "middle", class: "sub" }, clip(sub)) : null);
  const arrow = (x1, y1, x2, y2) => svg("line", { x1, y1, x2, y2, class: "edge", "marker-end": "url(#arrow)" });
  const qy = top(0, 1);
  const graph = svg("svg", { class: "plan", viewBox: `0 0 ${X[2] + W + 10} ${height}`, width: X[2] + W + 10, height, role: "img", "aria-label": `plan of ${d.id || "the query"}` },
    svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }))),
    sources.map((name, i) => [box(X[0], top(i, sources.length), name, sourceKind(name), "source"),
      arrow(X[0] + W, top(i, sources.length) + H / 2, X[1] - 2, qy + H / 2)]),
    box(X[1], qy, d.id || "query", d.state || "", `query state-${d.state || "NONE"}`),
    sinks.map((name, i) => [box(X[2], top(i, sinks.length), name, sourceKind(name), "sink"),
      arrow(X[1] + W, qy + H / 2, X[2] - 2, top(i, sinks.length) + H / 2)]));
  return h("div", { class: "plan-view" }, graph,
    d.statistics ? h("p", {}, d.statistics) : null,
    (d.queryErrors || []).map((e) => h("p", { class: "warn" }, `${e.type}: ${e.errorMessage}`)),
    h("details", {}, h("summary", {}, "execution plan and output columns"), h("pre", {}, d.executionPlan || ""), fieldsTable(d.fields)),
    h("pre", { class: "stmt" }, d.statementText || ""));
}

function sourceKind(name) {
  const source = state.sources.get(name);
  return source ? `${source.kind.toLowerCase()} \u00b7 ${source.topic}` : "";
}

function clip(text) {
  return text.length > 26 ? `${text.slice(0, 25)}\u2026` : text;
}

function explain(queryId) {
  return run(`EXPLAIN ${queryId};`);
}

// -- the sidebar and the cluster view --------------------------------------------------------------

let refreshTimer = null;

function refreshSoon(delay = 200) {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refresh, delay);
}

async function refresh() {
  clearTimeout(refreshTimer);
  const note = $("refreshed");
  if (!document.hidden) {
    try {
      const { entities } = await ksql("SHOW TYPES; SHOW QUERIES EXTENDED; DESCRIBE STREAMS; DESCRIBE TABLES;");
      const [types, queries, streams, tables] = entities;
      state.sources = new Map([...streams.sourceDescriptions, ...tables.sourceDescriptions]
        .map((d) => [d.name, { kind: d.type, topic: d.topic, fields: d.fields }]));
      state.queries = queries.queryDescriptions;
      let running = {};
      try {  // the queries this server runs: their offsets and ends give their lag
        running = (await getJson("/queryStatus")).queries || {};
      } catch (error) {
        running = {};
      }
      renderSidebar(streams.sourceDescriptions, tables.sourceDescriptions, types.types, state.queries, running);
      await refreshCluster();
      note.className = "muted";
      note.textContent = `refreshed ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      note.className = "error";
      note.textContent = `refresh failed: ${error instanceof ApiError && error.body.error_code ? `${error.body.error_code} ` : ""}${error.message}`;
    }
  }
  refreshTimer = setTimeout(refresh, REFRESH_MS);
}

// query id -> [records written, when]: the previous refresh's, for the throughput
const lastWritten = new Map();

function throughput(queryId, written) {
  const now = performance.now();
  const before = lastWritten.get(queryId);
  lastWritten.set(queryId, [written, now]);
  if (!before || now <= before[1] || written < before[0]) return null;
  return (written - before[0]) / ((now - before[1]) / 1000);
}

function sourceLag(status) {
  // records the query has yet to read: each source partition's end minus its next offset
  if (!status || !status.processed || !status.ends) return null;
  let lag = 0;
  for (const [topic, partitions] of Object.entries(status.processed)) {
    const ends = status.ends[topic] || {};
    for (const [partition, offset] of Object.entries(partitions)) {
      if (ends[partition] !== undefined) lag += Math.max(0, ends[partition] - offset);
    }
  }
  return lag;
}

function renderSidebar(streams, tables, types, queries, running = {}) {
  const names = (list) => list.map((d) => h("li", { dataset: { name: d.name } },
    h("button", { type: "button", class: "link", title: `DESCRIBE ${d.name}`, onclick: () => run(`DESCRIBE ${d.name};`) }, d.name),
    h("span", { class: "muted" }, ` ${d.topic}`)));
  $("list-streams").replaceChildren(...names(streams));
  $("list-tables").replaceChildren(...names(tables));
  $("list-types").replaceChildren(...Object.entries(types).map(([name, schema]) =>
    h("li", { dataset: { name } }, h("span", {}, name), h("span", { class: "muted" }, ` ${schemaText(schema)}`))));
  $("list-queries").replaceChildren(...queries.map((q) => {
    const written = /messages-written: (\d+)/.exec(q.statistics || "");
    const rate = written ? throughput(q.id, Number(written[1])) : null;
    const lag = sourceLag(running[q.id]);
    const figures = [
      written ? `${written[1]} records written` : "",
      rate !== null ? `${rate < 10 ? rate.toFixed(1) : Math.round(rate)}/s` : "",
      lag !== null ? `lag ${lag}` : "",
    ].filter(Boolean).join(" \u00b7 ");
    const last = (q.queryErrors || []).at(-1);
    return h("li", { dataset: { queryId: q.id, state: q.state } },
      h("button", { type: "button", class: "link", title: `EXPLAIN ${q.id}`, onclick: () => explain(q.id) }, q.id),
      h("span", { class: `badge state-${q.state}` }, q.state),
      h("div", { class: "muted" }, `\u2192 ${q.sinks.join(", ")}${figures ? ` \u00b7 ${figures}` : ""}`),
      last ? h("div", { class: "error-line", title: last.errorMessage }, `last error: ${last.errorMessage}`) : null);
  }));
  for (const [id, list] of [["list-streams", streams], ["list-tables", tables], ["list-types", Object.keys(types)], ["list-queries", queries]]) {
    if (!list.length) $(id).append(h("li", { class: "muted empty" }, "none"));
  }
}

async function refreshCluster() {
  const view = $("cluster");
  let status;
  try {
    status = await getJson("/clusterStatus");
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      view.replaceChildren(h("p", { class: "muted" }, error.message));
      return;
    }
    throw error;
  }
  const now = Date.now();
  const sample = new Map();
  const hosts = Object.entries(status.clusterStatus || {}).sort(([a], [b]) => a.localeCompare(b));
  view.replaceChildren(status.controller
    ? h("p", {}, `controller ${status.controller} (epoch ${status.controllerEpoch})`) : null);
  for (const [host, info] of hosts) {
    const lags = info.hostStoreLags?.stateStoreLags || {};
    const roles = new Map();
    for (const [tableName, held] of Object.entries(info.activeStandbyPerQuery || {})) {
      for (const p of held.activePartitions || []) roles.set(`${tableName}/${p.partition}`, "active");
      for (const p of held.standByPartitions || []) roles.set(`${tableName}/${p.partition}`, "standby");
    }
    for (const [tableName, store] of Object.entries(lags)) {
      for (const p of Object.keys(store.lagByPartition || {})) if (!roles.has(`${tableName}/${p}`)) roles.set(`${tableName}/${p}`, "replica");
    }
    const rows = [...roles].sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true })).map(([key, role]) => {
      const [tableName, partition] = key.split("/");
      const lag = lags[tableName]?.lagByPartition?.[partition];
      if (lag) sample.set(`${host} ${key}`, lag.offsetLag);
      return [tableName, partition, role, lag?.currentOffsetPosition ?? "", lag?.endOffsetPosition ?? "", lag?.offsetLag ?? "unknown"];
    });
    const heard = info.lastStatusUpdateMs ? `last heartbeat ${Math.max(0, Math.round((now - info.lastStatusUpdateMs) / 1000))} s ago` : "";
    view.append(h("section", { class: "host", dataset: { host, alive: info.hostAlive } },
      h("h3", {}, host, h("span", { class: `badge ${info.hostAlive ? "state-RUNNING" : "state-ERROR"}` }, info.hostAlive ? "alive" : "down"),
        status.controller === host ? h("span", { class: "badge" }, "controller") : null, h("span", { class: "muted" }, ` ${heard}`)),
      rows.length ? table(["table", "partition", "role", "position", "end", "lag"], rows) : h("p", { class: "muted" }, "holds no table partition")));
  }
  state.lags.push({ t: now, values: sample });
  while (state.lags.length && state.lags[0].t < now - LAG_WINDOW_MS) state.lags.shift();
  drawLags();
}

function drawLags() {
  const W = 640, H = 170, L = 44, R = 10, T = 10, B = 22;
  const keys = [...new Set(state.lags.flatMap((s) => [...s.values.keys()]))].sort();
  const chart = $("lag-chart");
  if (!keys.length) {
    chart.replaceChildren(h("p", { class: "muted" }, "no table partition reports a lag yet"));
    return;
  }
  const max = Math.max(1, ...state.lags.flatMap((s) => [...s.values.values()]));
  const now = state.lags.at(-1).t;
  const span = Math.max(60000, now - state.lags[0].t); // the chart grows to LAG_WINDOW_MS
  const x = (t) => L + ((t - (now - span)) / span) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  const lines = keys.map((key, i) => svg("polyline", {
    points: state.lags.filter((s) => s.values.has(key)).map((s) => `${x(s.t).toFixed(1)},${y(s.values.get(key)).toFixed(1)}`).join(" "),
    fill: "none", stroke: PALETTE[i % PALETTE.length], "stroke-width": 2,
  }, svg("title", {}, key)));
  chart.replaceChildren(
    svg("svg", { class: "lags", viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": "lag per partition" },
      svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }),
      svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }),
      svg("text", { x: L - 4, y: T + 10, "text-anchor": "end", class: "tick" }, String(max)),
      svg("text", { x: L - 4, y: H - B, "text-anchor": "end", class: "tick" }, "0"),
      svg("text", { x: L, y: H - 6, class: "tick" }, `\u2212${span >= 120000 ? `${Math.round(span / 60000)} min` : `${Math.round(span / 1000)} s`}`),
      svg("text", { x: W - R, y: H - 6, "text-anchor": "end", class: "tick" }, "now"),
      lines),
    h("ul", { class: "legend" }, keys.map((key, i) => h("li", {},
      svg("svg", { width: 12, height: 12 }, svg("rect", { width: 12, height: 12, fill: PALETTE[i % PALETTE.length] })),
      ` ${key}: lag ${state.lags.at(-1).values.get(key) ?? "unknown"}`))));
}

function showTab(name) {
  for (const tab of ["results", "cluster"]) {
    $(`tab-${tab}`).setAttribute("aria-selected", String(tab === name));
    $(`view-${tab}`).hidden = tab !== name;
  }
}

// -- the editor: history and completion ------------------------------------------------------------

function loadHistory() {
  try {
    const items = JSON.parse(localStorage.getItem(HISTORY_KEY) || "[]");
    return Array.isArray(items) ? items.filter((x) => typeof x === "string") : [];
  } catch {
    return [];
  }
}

function remember(text) {
  text = text.trim();
  state.history = state.history.filter((x) => x !== text);
  state.history.push(text);
  state.history.splice(0, Math.max(0, state.history.length - HISTORY_MAX));
  state.historyAt = null;
  try {
    localStorage.setItem(HISTORY_KEY, JSON.stringify(state.history));
  } catch {
    // storage full or disabled: the history lasts as long as the page
  }
}

function walkHistory(editor, step) {
  const browsing = state.historyAt !== null && editor.value === state.history[state.historyAt];
  if (!(editor.value === "" || browsing) || !state.history.length) return false;
  let at = state.historyAt === null ? (step < 0 ? state.history.length : null) : state.historyAt;
  if (at === null) return false;
  at += step;
  if (at < 0) at = 0;
  if (at >= state.history.length) {
    state.historyAt = null;
    editor.value = "";
    return true;
  }
  state.historyAt = at;
  editor.value = state.history[at];
  editor.setSelectionRange(editor.value.length, editor.value.length);
  return true;
}

const completion = { items: [], at: 0, word: "" };

function candidates(text, position) {
  const word = (/[A-Za-z_][A-Za-z0-9_]*$/.exec(text.slice(0, position)) || [""])[0];
  const before = text.slice(0, position - word.length);
  const previous = ((/([A-Za-z_]+)\s*$/.exec(before) || [])[1] || "").toUpperCase();
  const statement = text.slice(text.lastIndexOf(";", position - 1) + 1, (text.indexOf(";", position) + 1 || text.length + 1) - 1);
  const sources = [...state.sources.keys()];
  let groups;
  if (SOURCE_CONTEXT.has(previous)) {
    groups = [sources];
  } else if (QUERY_CONTEXT.has(previous)) {
    groups = [state.queries.map((q) => q.id)];
  } else {
    const used = sources.filter((name) => new RegExp(`\\b${name.replace(/[^\w]/g, "\\$&")}\\b`, "i").test(statement));
    const columns = (names) => names.flatMap((name) => state.sources.get(name).fields.map((f) => f.name));
    groups = [columns(used), KEYWORDS, sources, columns(sources), state.functions];
  }
  const wanted = word.toUpperCase();
  const found = [];
  for (const group of groups) {
    for (const name of group) {
      const upper = name.toUpperCase();
      if (upper.startsWith(wanted) && upper !== wanted && !found.includes(name)) found.push(name);
    }
  }
  return { word, items: found.slice(0, 12) };
}

function openCompletion(editor, explicit) {
  const { word, items } = candidates(editor.value, editor.selectionStart);
  if (!items.length || (!explicit && !word)) return closeCompletion();
  Object.assign(completion, { items, at: 0, word });
  const list = $("complete");
  list.replaceChildren(...items.map((item, i) => h("li", {
    role: "option", "aria-selected": String(i === 0),
    onmousedown: (event) => {
      event.preventDefault();
      completion.at = i;
      acceptCompletion(editor);
    },
  }, item)));
  const { left, top } = caretPosition(editor);
  list.style.left = `${left}px`;
  list.style.top = `${top}px`;
  list.hidden = false;
}

function closeCompletion() {
  $("complete").hidden = true;
  completion.items = [];
}

function moveCompletion(step) {
  const n = completion.items.length;
  completion.at = (completion.at + step + n) % n;
  [...$("complete").children].forEach((li, i) => li.setAttribute("aria-selected", String(i === completion.at)));
}

function acceptCompletion(editor) {
  let chosen = completion.items[completion.at];
  const word = completion.word;
  if (word && word === word.toLowerCase() && KEYWORDS.includes(chosen)) chosen = chosen.toLowerCase();
  const end = editor.selectionStart;
  editor.setRangeText(chosen, end - word.length, end, "end");
  closeCompletion();
}

/** Where the caret is inside the editor, from a hidden copy of its text up to the caret. */
function caretPosition(editor) {
  const style = getComputedStyle(editor);
  const mirror = h("div");
  for (const p of ["boxSizing", "width", "fontFamily", "fontSize", "fontWeight", "lineHeight", "letterSpacing",
    "paddingTop", "paddingRight", "paddingBottom", "paddingLeft", "borderTopWidth", "borderRightWidth",
    "borderBottomWidth", "borderLeftWidth", "borderStyle", "tabSize"]) mirror.style[p] = style[p];
  Object.assign(mirror.style, { position: "absolute", visibility: "hidden", whiteSpace: "pre-wrap", overflowWrap: "break-word", top: "0", left: "0" });
  mirror.textContent = editor.value.slice(0, editor.selectionStart);
  const marker = h("span", {}, "\u200b");
  mirror.append(marker);
  editor.parentElement.append(mirror);
  const lineHeight = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.3;
  const position = { left: marker.offsetLeft - editor.scrollLeft, top: marker.offsetTop - editor.scrollTop + lineHeight };
  mirror.remove();
  return position;
}

function onKey(event) {
  const editor = event.target;
  const open = !$("complete").hidden;
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    closeCompletion();
    const { selectionStart: a, selectionEnd: b, value } = editor;
    run(a !== b ? value.slice(a, b) : value);
  } else if (event.key === " " && event.ctrlKey) {
    event.preventDefault();
    openCompletion(editor, true);
  } else if (open && (event.key === "ArrowDown" || event.key === "ArrowUp")) {
    event.preventDefault();
    moveCompletion(event.key === "ArrowDown" ? 1 : -1);
  } else if (open && (event.key === "Enter" || event.key === "Tab")) {
    event.preventDefault();
    acceptCompletion(editor);
  } else if (open && event.key === "Escape") {
    event.preventDefault();
    closeCompletion();
  } else if ((event.key === "ArrowUp" || event.key === "ArrowDown") && !event.shiftKey && !event.altKey) {
    if (walkHistory(editor, event.key === "ArrowUp" ? -1 : 1)) event.preventDefault();
  }
}

// -- start -----------------------------------------------------------------------------------------

async function start() {
  const editor = $("editor");
  editor.addEventListener("keydown", onKey);
  editor.addEventListener("input", () => {
    if (state.historyAt !== null && editor.value !== state.history[state.historyAt]) state.historyAt = null;
    openCompletion(editor, false);
  });
  editor.addEventListener("blur", closeCompletion);
  $("editor-form").addEventListener("submit", (event) => {
    event.preventDefault();
    run(editor.value);
  });
  $("stop").addEventListener("click", () => [...state.streams].forEach(stopStream));
  $("tab-results").addEventListener("click", () => showTab("results"));
  $("tab-cluster").addEventListener("click", () => showTab("cluster"));
  document.addEventListener("visibilitychange", () => !document.hidden && refreshSoon(0));
  editor.focus();
  try {
    const info = await getJson("/info");
    const server = info.KsqlServerInfo || {};
    $("server").textContent = `${location.host} \u00b7 headwater ${info.headwaterVersion || ""} \u00b7 service ${server.ksqlServiceId} \u00b7 ${server.serverStatus}`;
  } catch (error) {
    $("server").textContent = `cannot reach the server: ${error.message}`;
    $("server").className = "error";
  }
  refresh();
  try {
    const { entities } = await ksql("SHOW FUNCTIONS;");
    state.functions = entities[0].functions.map((f) => f.name);
  } catch {
    // completion goes on without function names; the sidebar's refresh reports server errors
  }
}

document.addEventListener("DOMContentLoaded", start);
