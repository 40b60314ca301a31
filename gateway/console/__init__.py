"""The web console's static files (``index.html``, ``console.js``, ``console.css``), served by
``gateway.console_routes``; a package only so that the wheel ships them as its data. No code."""
