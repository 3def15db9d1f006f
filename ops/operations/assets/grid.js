// The web grid: a scope's items in a table, sorted by a custom field through the multikey index,
// paged with the grid's cursors. No framework, no build step.
"use strict";

const LIMIT = 10;

const state = {
  scope: "",
  columns: [], // the order attribute and the index's projected attributes, from the server
  source: "",  // the indexed map attribute
  fields: [],
  field: null,
  desc: false,
  cursors: [null], // cursors[i] opens page i
  page: 0,
  next: null,
  filter: { from: "", to: "", prefix: "" },
};

const $ = (id) => document.getElementById(id);

// A DynamoDB JSON value as plain text.
function plain(value) {
  if (value === undefined || value === null) return "";
  const [type, inner] = Object.entries(value)[0] || [];
  switch (type) {
    case "S": case "N": case "B": return String(inner);
    case "BOOL": return String(inner);
    case "NULL": return "null";
    case "SS": case "NS": case "BS": return "{" + inner.join(", ") + "}";
    case "L": return "[" + inner.map(plain).join(", ") + "]";
    case "M": return "{" + Object.entries(inner).map(([k, v]) => k + ": " + plain(v)).join(", ") + "}";
    default: return JSON.stringify(value);
  }
}

function showError(message) {
  const error = $("error");
  error.textContent = message;
  error.hidden = !message;
}

async function getJson(url) {
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function header() {
  const row = $("head");
  row.replaceChildren();
  for (const name of state.columns) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = name;
    row.append(th);
  }
  for (const field of state.fields) {
    const th = document.createElement("th");
    th.scope = "col";
    th.dataset.field = field.id;
    if (field.id === state.field) th.setAttribute("aria-sort", state.desc ? "descending" : "ascending");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = field.name;
    button.title = "Sort by " + field.name + " (" + field.id + ")";
    button.addEventListener("click", () => sortBy(field.id));
    th.append(button);
    row.append(th);
  }
}

function sortBy(field) {
  if (state.field === field) {
    state.desc = !state.desc;
  } else {
    state.field = field;
    state.desc = false;
  }
  restart();
}

function restart() {
  state.cursors = [null];
  state.page = 0;
  load();
}

function render(body) {
  const rows = $("rows");
  rows.replaceChildren();
  for (const line of body.rows) {
    const attributes = line.attributes;
    const tr = document.createElement("tr");
    tr.dataset.id = plain(Object.values(line.key)[0]);
    tr.dataset.phase = line.phase;
    if (line.phase === "nulls") tr.className = "nulls";
    for (const [i, name] of state.columns.entries()) {
      const td = document.createElement("td");
      td.textContent = plain(attributes[name]);
      if (i === 0) td.className = "num";
      tr.append(td);
    }
    const custom = (attributes[state.source] && attributes[state.source].M) || {};
    for (const field of state.fields) {
      const td = document.createElement("td");
      td.textContent = plain(custom[field.id]);
      if (field.id === state.field) td.className = "sorted";
      tr.append(td);
    }
    rows.append(tr);
  }
  const requests = body.requests;
  $("cost").textContent =
    `This page: ${requests.queries} Query, ${requests.batchGets} BatchGetItem` +
    (requests.retries ? `, ${requests.retries} retries` : "") + `, ${body.ms} ms.`;
  state.next = body.next;
  $("next").disabled = !body.next;
  $("prev").disabled = state.page === 0;
  $("page-number").textContent = "Page " + (state.page + 1);
  const field = state.fields.find((f) => f.id === state.field);
  $("caption").textContent = `Scope ${state.scope}, sorted by ${field ? field.name : state.field}, ` +
    (state.desc ? "descending" : "ascending") + "; items without a value last, by " + state.columns[0];
  $("filter-label").textContent = "Filter " + (field ? field.name : "") + ":";
  $("grid").hidden = false;
  $("filter").hidden = false;
  $("grid").dataset.ready = String(Date.now());
}

async function load() {
  header();
  showError("");
  const params = new URLSearchParams({
    scope: state.scope, field: state.field, limit: String(LIMIT), attributes: state.source,
  });
  if (state.desc) params.set("desc", "1");
  const cursor = state.cursors[state.page];
  if (cursor) params.set("cursor", cursor);
  for (const [name, value] of Object.entries(state.filter)) if (value) params.set(name, value);
  $("status").textContent = "Loading…";
  try {
    render(await getJson("/api/page?" + params));
    $("status").textContent = "";
  } catch (e) {
    $("status").textContent = "";
    showError("The page could not be read: " + e.message);
  }
}

async function open(scope) {
  state.scope = scope;
  history.replaceState(null, "", "?scope=" + encodeURIComponent(scope));
  try {
    const body = await getJson("/api/fields?scope=" + encodeURIComponent(scope));
    state.fields = body.fields;
    state.columns = body.columns;
    state.source = body.source;
    state.field = state.fields.length ? state.fields[0].id : "";
    state.desc = false;
    restart();
  } catch (e) {
    showError("The scope's fields could not be read: " + e.message);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("open").addEventListener("submit", (event) => {
    event.preventDefault();
    open($("scope").value.trim());
  });
  $("filter").addEventListener("submit", (event) => {
    event.preventDefault();
    state.filter = { from: $("from").value.trim(), to: $("to").value.trim(), prefix: $("prefix").value.trim() };
    restart();
  });
  $("clear").addEventListener("click", () => {
    for (const id of ["from", "to", "prefix"]) $(id).value = "";
    state.filter = { from: "", to: "", prefix: "" };
    restart();
  });
  $("next").addEventListener("click", () => {
    if (!state.next) return;
    state.cursors[state.page + 1] = state.next;
    state.page += 1;
    load();
  });
  $("prev").addEventListener("click", () => {
    if (state.page === 0) return;
    state.page -= 1;
    load();
  });
  const scope = new URLSearchParams(location.search).get("scope");
  if (scope) {
    $("scope").value = scope;
    open(scope);
  }
});
