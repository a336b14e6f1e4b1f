// Starts GraphiQL on this server's GraphQL endpoint: queries and mutations over HTTP POST,
// subscriptions over WebSocket (graphql-ws, the graphql-transport-ws protocol). The Headers
// pane's Authorization goes with both: as a header on HTTP, and in connection_init on the
// WebSocket (browsers cannot set headers on one), which is where the server looks for it.
(function () {
  "use strict";

  var root = document.getElementById("graphiql");
  var endpoint = root.getAttribute("data-endpoint");
  var httpURL = location.origin + endpoint;
  var wsURL = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + endpoint;

  var defaultQuery = [
    "# Interlock's GraphQL API. With authentication on, open Headers (below) and put in",
    '#   {"Authorization": "Bearer YOUR-TOKEN"}',
    "# It is sent with queries and mutations, and with subscriptions over WebSocket.",
    "",
    "query Inbox {",
    "  suspendedRuns {",
    "    total",
    "    runs { id agentId status createdAt toolCalls { toolName args requiresApproval } }",
    "  }",
    "}",
    "",
    "# subscription Changes {",
    "#   suspendedRunsChanged { kind run { id status } }",
    "# }",
    "",
  ].join("\n");

  // operationType finds the type (query, mutation, subscription) of the operation that will run:
  // the one named operationName, or the document's only operation. It reads the document's top
  // level only, skipping strings, block strings and comments.
  function operationType(doc, operationName) {
    var ops = [];
    var depth = 0;
    var i = 0;
    var header = null; // the operation whose selection set has not opened yet
    while (i < doc.length) {
      var c = doc[i];
      if (c === "#") {
        while (i < doc.length && doc[i] !== "\n") i++;
        continue;
      }
      if (c === '"') {
        if (doc.substr(i, 3) === '"""') {
          var end = doc.indexOf('"""', i + 3);
          i = end < 0 ? doc.length : end + 3;
        } else {
          i++;
          while (i < doc.length && doc[i] !== '"' && doc[i] !== "\n") i += doc[i] === "\\" ? 2 : 1;
          i++;
        }
        continue;
      }
      if (depth === 0 && (c === "(" || c === "@") && header) header.named = true;
      if (c === "{" && depth === 0) {
        ops.push(header || { type: "query", name: null }); // { … } alone is a query
        header = null;
      }
      if (c === "{" || c === "(" || c === "[") depth++;
      if (c === "}" || c === ")" || c === "]") depth--;
      var word = /^[_A-Za-z][_0-9A-Za-z]*/.exec(doc.slice(i, i + 256));
      if (word) {
        if (depth === 0) {
          if (header && !header.named) {
            header.name = word[0];
            header.named = true;
          } else if (!header && /^(query|mutation|subscription|fragment)$/.test(word[0])) {
            header = { type: word[0], name: null, named: false };
          }
        }
        i += word[0].length;
        continue;
      }
      i++;
    }
    ops = ops.filter(function (op) {
      return op.type !== "fragment";
    });
    for (var k = 0; k < ops.length; k++) {
      if (operationName ? ops[k].name === operationName : true) return ops[k].type;
    }
    return ops.length ? ops[0].type : "query";
  }

  function authorization(headers) {
    if (!headers) return "";
    for (var name in headers) {
      if (name.toLowerCase() === "authorization") return String(headers[name]);
    }
    return "";
  }

  // One WebSocket client per Authorization value: a new token in the Headers pane opens a new
  // connection with it.
  var sockets = {};
  function socketFor(auth) {
    if (!sockets[auth]) {
      sockets[auth] = graphqlWs.createClient({
        url: wsURL,
        lazy: true,
        retryAttempts: 0,
        connectionParams: auth ? { authorization: auth } : {},
      });
    }
    return sockets[auth];
  }

  function describe(err) {
    if (err && typeof err.code === "number") {
      return "The WebSocket closed (" + err.code + (err.reason ? ": " + err.reason : "") + ")";
    }
    if (Array.isArray(err)) return err.map(describe).join("; ");
    return (err && err.message) || String(err);
  }

  // subscribe runs a subscription over the WebSocket as an async iterable of results, which
  // GraphiQL shows one after the other; a failure becomes a result with the error.
  async function* subscribe(params, auth) {
    try {
      for await (var result of socketFor(auth).iterate({
        query: params.query,
        variables: params.variables,
        operationName: params.operationName,
      })) {
        yield result;
      }
    } catch (err) {
      yield { errors: [{ message: describe(err) }] };
    }
  }

  var http = GraphiQL.createFetcher({ url: httpURL });

  function fetcher(params, opts) {
    var headers = (opts && opts.headers) || {};
    if (operationType(params.query || "", params.operationName) === "subscription") {
      return subscribe(params, authorization(headers));
    }
    return http(params, opts);
  }

  // The schema (docs, autocomplete) was read with the headers the page opened with: with
  // authentication on, none, so it failed. When the Headers pane's Authorization changes (and
  // parses), the schema is read again with it, as GraphiQL's own "Re-fetch GraphQL schema"
  // button does (clicked for the person, after a pause in the typing).
  var lastAuth = "";
  var refetchTimer = null;
  function onEditHeaders(text) {
    var headers;
    try {
      headers = text && text.trim() ? JSON.parse(text) : {};
    } catch (e) {
      return; // still being typed
    }
    var auth = authorization(headers);
    if (auth === lastAuth) return;
    lastAuth = auth;
    clearTimeout(refetchTimer);
    refetchTimer = setTimeout(function () {
      var button = document.querySelector('[aria-label="Re-fetch GraphQL schema"]');
      if (button) button.click();
    }, 400);
  }

  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      onEditHeaders: onEditHeaders,
      defaultQuery: defaultQuery,
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: false, // a token typed in stays in this tab, not in localStorage
      defaultEditorToolsVisibility: "headers",
    }),
  );
})();
