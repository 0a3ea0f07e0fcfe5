"""``manage.py`` commands for API keys (Django's layout): the package ``commands`` and ``keys``, what they share."""
