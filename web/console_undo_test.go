package web_test

import (
	"context"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// noUndoScript makes the console send decisions at once (hold.js), unless a test set another
// delay: the console tests decide and look at the outcome; the ones about Undo set their own.
const noUndoScript = `try { if (localStorage.getItem("interlock.undo.ms") === null) localStorage.setItem("interlock.undo.ms", "0"); } catch {}`

// noUndo adds noUndoScript to every document the tab loads.
func noUndo() chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: noUndoScript})
		return chromedp.Void{}, err
	}
}
