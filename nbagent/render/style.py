"""The one stylesheet of every nbagent view: colours from JupyterLab's theme variables, scoped by the class ``nbagent``.

:data:`STYLE` goes once into every output (the static transcript, the live view's header, the replay,
the server's page); :func:`sibling_style` lets a static output stand in for a live widget output.
"""

from __future__ import annotations

# The root class three times: a rule then outranks JupyterLab's own rules for rendered HTML (the strongest name
# three classes, e.g. ``.jp-ThemedContainer .jp-RenderedHTMLCommon pre``), so outputs and widgets look the same.
ROOT = ".nbagent.nbagent.nbagent"


def _rule(selectors: str, declarations: str) -> str:
    """One rule nested in the root rule (CSS nesting: ``& x`` is ``ROOT x``, at the root's specificity)."""
    if selectors == "&":
        return f"{declarations};"
    return f"& {f':is({selectors})' if ',' in selectors else selectors}{{{declarations}}}"


# MathJax typesets every $…$ pair of an HTML output (JupyterLab and Notebook 7: MathJax 3, whose default classes these are;
# nbconvert's classic template: MathJax 2's tex2jax). nbagent's own lines carry dollars ('$0.05 this request'), so its
# outputs are marked not to be read as math, and only the model's Markdown inside them is marked to be read again.
NO_MATH = "mathjax_ignore tex2jax_ignore"
MATH = "mathjax_process tex2jax_process"
# A Markdown table column's alignment: markdown-it's inline style, and the class the sanitized HTML carries instead.
ALIGN_CLASSES = {"text-align:right": "nbagent-right", "text-align:center": "nbagent-center"}
TEXT = "var(--jp-content-font-color1,#1a1a1a)"
DIM = "var(--jp-content-font-color2,#555)"  # 4.6:1 on white in Light, 9.5:1 on #111 in Dark
BORDER = "1px solid var(--jp-border-color2,#e0e0e0)"
CODE_FONT = "font-family:var(--jp-code-font-family,monospace)"
# A diff line's band: the theme's success or error colour, mostly transparent, so the text keeps its colour in Light and Dark.
DIFF_ADD = "color-mix(in srgb,var(--jp-success-color1,#2e7d32) 20%,transparent)"
DIFF_DEL = "color-mix(in srgb,var(--jp-error-color1,#b00020) 20%,transparent)"
# Python code: the theme's editor colours, picked to read at 4.5:1 in Light and in Dark (comments use DIM).
CODE_COLOURS = {
    "pg-k pg-kc pg-kd pg-kn pg-kp pg-kr pg-kt pg-ow": "color:var(--jp-mirror-editor-keyword-color,#008000);font-weight:bold",
    "pg-s pg-sa pg-sb pg-sc pg-dl pg-sd pg-s2 pg-se pg-sh pg-si pg-sx pg-sr pg-s1 pg-ss": "color:var(--jp-mirror-editor-string-color,#ba2121)",
    "pg-m pg-mb pg-mf pg-mh pg-mi pg-il pg-mo": "color:var(--jp-mirror-editor-number-color,#008800)",
    "pg-c pg-ch pg-cm pg-c1 pg-cs pg-cp pg-cpf": f"color:{DIM};font-style:italic",
    "pg-nb pg-bp": "color:var(--jp-mirror-editor-builtin-color,#008000)",
    "pg-nf pg-fm pg-nc": "color:var(--jp-mirror-editor-def-color,#0000ff)",
    "pg-nd": "color:var(--jp-mirror-editor-property-color,#0055aa)",
    "pg-o": "color:var(--jp-mirror-editor-operator-color,#7800c2)",
}
_RULES = "".join(
    [
        _rule("&", f"background-color:var(--jp-layout-color0,#fff);color:{TEXT};line-height:1.5"),
        _rule(".jupyter-widget-html-content", "line-height:1.5"),
        _rule("p,ul,ol,blockquote,table,pre,details", "margin:4px 0"),
        _rule("h1,h2,h3,h4,h5,h6", "margin:8px 0 4px;line-height:1.25;font-weight:bold"),
        _rule("h1", "font-size:1.4em") + _rule("h2", "font-size:1.25em") + _rule("h3,h4,h5,h6", "font-size:1.1em"),
        _rule("ul,ol", "padding-left:2em"),
        _rule("a", "color:var(--jp-content-link-color,#0d47a1);text-decoration:underline"),
        _rule(
            "pre",
            f"background-color:var(--jp-layout-color0,#fff);color:{TEXT};border:{BORDER};padding:4px 6px;"
            f"white-space:pre-wrap;overflow-wrap:anywhere;{CODE_FONT};font-size:var(--jp-code-font-size,13px);line-height:1.4",
        ),
        _rule("code", f"{CODE_FONT};font-size:0.95em;background-color:var(--jp-layout-color2,#eee);color:{TEXT};padding:0 3px"),
        _rule("pre code", "background:none;padding:0;font-size:inherit"),
        _rule("blockquote", "border-left:3px solid var(--jp-border-color1,#bdbdbd);padding:0 8px"),
        _rule("table", "border-collapse:collapse"),
        _rule("th,td", "border:1px solid var(--jp-border-color1,#bdbdbd);padding:2px 8px;text-align:left"),
        _rule("th", "font-weight:bold") + _rule("img", "max-width:100%"),
        _rule(".nbagent-right", "text-align:right;font-variant-numeric:tabular-nums"),  # a table column's (outranks th,td)
        _rule(".nbagent-center", "text-align:center"),
        _rule(".nbagent-header", f"border-bottom:{BORDER};margin-bottom:4px;padding-bottom:2px"),
        _rule(".nbagent-dim,.nbagent-origin,.nbagent-gutter", f"color:{DIM}"),
        _rule(".nbagent-origin,.nbagent-gutter", "font-size:0.9em"),
        _rule(".nbagent-label", "font-weight:bold;margin-right:4px"),
        _rule(".nbagent-user,.nbagent-note,.nbagent-approval,.nbagent-error", "margin:4px 0;padding-left:6px"),
        _rule(".nbagent-request", "white-space:pre-wrap"),
        _rule(".nbagent-request-block", "margin:2px 0 4px;max-height:16em;overflow:auto"),  # a field's block under "You:"
        _rule(".nbagent-note", "font-style:italic;border-left:3px solid var(--jp-border-color1,#bdbdbd)"),
        _rule(
            ".nbagent-error,.nbagent-tool-error>summary,.nbagent-result-error",
            "border-left:3px solid var(--jp-error-color1,#b00020);padding-left:6px",
        ),
        _rule(".nbagent-result", "margin:4px 0"),
        _rule(".nbagent-work", "margin:2px 0 4px 1.2em"),  # under its row, as a cell's output is under its code
        _rule(".nbagent-row", "padding-left:1.2em"),  # in line with the summaries of the collapsible rows
        _rule(".nbagent-approval-code", "max-height:16em;overflow:auto"),  # all of what will run, never cut
        _rule(".nbagent-live-link", "white-space:nowrap"),
        _rule(".nbagent-approval", "border-left:3px solid var(--jp-warn-color0,#e65100)"),
        # An invisible or direction-changing character, shown as its escape (render/code.py mark_hidden), and the warning naming them.
        _rule(
            ".nbagent-hidden",
            "color:var(--jp-error-color1,#b00020);border:1px solid var(--jp-error-color1,#b00020);border-radius:2px;font-weight:bold",
        ),
        _rule(".nbagent-hidden-note", "margin:4px 0;padding-left:6px;border-left:3px solid var(--jp-error-color1,#b00020)"),
        # A proposed cell edit's diff (notebook/edit_view.py): each line a full-width band, green added, red removed.
        _rule(".nbagent-diff>span", "display:inline-block;min-width:100%;box-sizing:border-box"),
        _rule(".nbagent-diff-add", f"background-color:{DIFF_ADD};box-shadow:inset 3px 0 var(--jp-success-color1,#2e7d32)"),
        _rule(".nbagent-diff-del", f"background-color:{DIFF_DEL};box-shadow:inset 3px 0 var(--jp-error-color1,#b00020)"),
        _rule(".nbagent-diff-hunk", f"color:{DIM}"),
        _rule(".nbagent-tool>summary,.nbagent-compaction summary", "cursor:pointer"),
        _rule(".nbagent-compaction", "margin:4px 0;padding-left:6px;border-left:3px double var(--jp-brand-color1,#1976d2)"),
        *(f"& .nbagent-code :is({','.join('.' + c for c in classes.split())}){{{style}}}" for classes, style in CODE_COLOURS.items()),
        _rule(".jupyter-button", "background-color:var(--jp-layout-color2,#eee);color:var(--jp-ui-font-color1,#1a1a1a)"),
        _rule(
            ".jupyter-button:disabled",
            f"opacity:1;background-color:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color2,#555);border:{BORDER};cursor:not-allowed",
        ),
        _rule(".nbagent-approve", "border-left:4px solid var(--jp-success-color1,#2e7d32)"),
        _rule(".nbagent-decline", "border-left:4px solid var(--jp-error-color1,#b00020)"),
        _rule(".nbagent-replay-item", "border-left:3px solid transparent;padding-left:6px;margin:2px 0"),
        _rule(".nbagent-replay-item.nbagent-current", "border-left-color:var(--jp-brand-color1,#1976d2)"),
        # The live panel's widgets laid out as the static transcript that replaces them: no widget margins, minimum
        # heights or box padding, so the swap at the end of a turn moves nothing below it (notebook/panel.py).
        "&.widget-box{margin:0;padding:0;height:auto;min-height:0}",
        _rule(".widget-html,.widget-box", "margin:0;padding:0;height:auto;min-height:0"),
        _rule(".widget-html-content", "height:auto;min-height:0;line-height:1.5"),
        # The live header's mark (working, or waiting for an approval): at the right of its first line, no line of its own.
        _rule(
            ".nbagent-activity",
            "float:right;margin-left:8px;padding-left:6px;font-style:italic;border-left:3px solid var(--jp-brand-color1,#1976d2)",
        ),
        _rule(".nbagent-activity-waiting", "font-style:normal;font-weight:600;border-left-color:var(--jp-warn-color1,#f57c00)"),
    ]
)
CSS = f"{ROOT}{{{_RULES}}}"  # one rule, the others nested in it
STYLE = f"<style>{CSS}</style>"  # put once in every output (the static transcript, or the live view's header)


def sibling_style(key: str) -> str:
    """The rules that let a static output stand in for the live widget output right after it (the replay's).

    While the widget ``nbagent-live-KEY`` is mounted in the same output area, the static output is
    hidden; when it is not (a reopened notebook: its kernel is gone, and JupyterLab's widget renderer
    shows "Loading widget..." or "Error displaying widget: model not found"), the widget output is.
    """
    live, static = f"nbagent-live-{key}", f"nbagent-static-{key}"
    return (
        f"<style>.jp-OutputArea:has(.{live}) .jp-OutputArea-child:has(.{static}){{display:none}}"
        f".jp-OutputArea-child:has(.{static})+.jp-OutputArea-child:not(:has(.{live})){{display:none}}</style>"
    )
