"""The API docs work offline: Swagger UI and ReDoc load their assets from the app itself."""

import re

from fastapi.testclient import TestClient


def test_docs_pages_load_their_assets_from_the_app(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        html = client.get(page)
        assert html.status_code == 200
        assets = re.findall(r"""(?:src|href)=["']([^"']+\.(?:js|css))["']""", html.text)
        assert assets, f"{page} references no script or stylesheet"
        for asset in assets:
            assert asset.startswith("/"), f"{page} loads {asset} from elsewhere"
            served = client.get(asset)
            assert served.status_code == 200 and len(served.content) > 10_000, asset
    assert client.get("/openapi.json").json()["info"]["title"] == "supportbot"
