"""The whole URL table of the dashboard, in one place."""

from __future__ import annotations

from aiohttp import web

from . import api, budgets, pages, privacy, review, usage
from .render import static_dir

FACT_ID = r"{fact_id:[0-9]{1,18}}"
GUILD_ID = r"{guild_id:[0-9]{1,20}}"
USER_ID = r"{user_id:[0-9]{1,20}|__lore__}"
DAY = r"{day:[0-9]{4}-[0-9]{2}-[0-9]{2}}"
ITEM_ID = r"{item_id:[0-9]{1,18}}"

ROUTES: tuple[web.RouteDef, ...] = (
    # Pages (each also answers ?format=json with the context it renders)
    web.get("/", pages.overview, name="overview"),
    web.get(f"/guilds/{GUILD_ID}", pages.guild_page, name="guild"),
    web.get(f"/guilds/{GUILD_ID}/members/{USER_ID}", pages.member_page, name="member"),
    web.get("/search", pages.search_page, name="search"),
    web.get("/facts", pages.facts_page, name="facts"),
    web.get(f"/facts/{FACT_ID}", pages.fact_page, name="fact"),
    web.post(f"/facts/{FACT_ID}", pages.fact_post, name="fact-change"),
    web.get("/consolidation", pages.consolidation_page, name="consolidation"),
    web.post(
        r"/consolidation/{run_id:[0-9]{1,18}}/undo",
        pages.consolidation_undo,
        name="consolidation-undo",
    ),
    web.get("/review", review.review_page, name="review"),
    web.post(f"/review/{ITEM_ID}", review.review_post, name="review-decide"),
    web.get("/snapshot", pages.snapshot_page, name="snapshot"),
    web.post("/snapshot/refresh", pages.snapshot_refresh, name="snapshot-refresh"),
    web.get("/journal", pages.journal_index, name="journal"),
    web.get(f"/journal/{DAY}", pages.journal_day, name="journal-day"),
    web.get("/traces", pages.traces_page, name="traces"),
    web.get("/activity", pages.activity_page, name="activity"),
    web.get("/requests", usage.requests_page, name="requests"),
    web.get("/settings", pages.settings_page, name="settings"),
    web.get("/privacy", privacy.privacy_page, name="privacy"),
    web.post("/settings", pages.settings_post, name="settings-change"),
    web.get("/login", pages.login_page, name="login"),
    web.post("/login", pages.login_post, name="login-post"),
    web.post("/logout", pages.logout, name="logout"),
    web.post("/logout/everywhere", pages.logout_everywhere, name="logout-everywhere"),
    # JSON API: every answer is JSON, errors as {"ok": false, "error", "status"}
    web.get("/api/memory", api.get_snapshot, name="api-memory"),
    web.post("/api/memory/refresh", api.refresh_snapshot, name="api-memory-refresh"),
    web.get("/api/memory/search", api.search, name="api-search"),
    web.get("/api/memory/facts", api.list_facts, name="api-facts"),
    web.get(f"/api/memory/facts/{FACT_ID}", api.get_fact, name="api-fact"),
    web.patch(f"/api/memory/facts/{FACT_ID}", api.patch_fact, name="api-fact-patch"),
    web.delete(f"/api/memory/facts/{FACT_ID}", api.delete_fact, name="api-fact-delete"),
    web.get(f"/api/memory/facts/{FACT_ID}/history", api.fact_history, name="api-fact-history"),
    web.get("/api/memory/procedures", api.procedures, name="api-procedures"),
    web.get("/api/memory/episodes", api.episodes, name="api-episodes"),
    web.get("/api/memory/traces", api.traces, name="api-traces"),
    web.get("/api/memory/health", api.health, name="api-health"),
    web.get("/api/guilds", api.guilds, name="api-guilds"),
    web.get(f"/api/guilds/{GUILD_ID}/members", api.members, name="api-members"),
    web.post(f"/api/memory/facts/{FACT_ID}/pin", budgets.pin_fact, name="api-fact-pin"),
    web.delete(f"/api/memory/facts/{FACT_ID}/pin", budgets.unpin_fact, name="api-fact-unpin"),
    web.get(f"/api/guilds/{GUILD_ID}/budgets", budgets.get_budgets, name="api-budgets"),
    web.delete(f"/api/guilds/{GUILD_ID}/facts", budgets.purge_guild_facts, name="api-purge"),
    web.delete(
        f"/api/guilds/{GUILD_ID}/members/{USER_ID}/facts",
        budgets.purge_member_facts,
        name="api-purge-member",
    ),
    web.get("/api/settings", api.get_settings, name="api-settings"),
    web.patch("/api/settings", api.patch_settings, name="api-settings-patch"),
    web.get("/api/review", review.api_list, name="api-review"),
    web.post(f"/api/review/{ITEM_ID}", review.api_decide, name="api-review-decide"),
    web.get("/api/csrf", api.csrf, name="api-csrf"),
    web.get("/api/usage/series", usage.series_api, name="api-usage-series"),
    web.get("/api/usage/requests", usage.requests_api, name="api-usage-requests"),
    web.get("/metrics", api.metrics, name="metrics"),
)


def setup_routes(app: web.Application) -> None:
    app.router.add_routes(ROUTES)
    app.router.add_static("/static/", static_dir(), name="static", append_version=False)
