"""Pipeline glue every DVC stage and notebook uses: how a notebook builds its config (`notebook`), where every output
lives (`layout`: run folders, reports/), and parameter sweeps over a notebook (`sweep`)."""
